#pragma once
// The threads backend: n ranks in one process, one host thread per rank, each rank's tensors on
// its own device (CPU tensors, or GPUs of this process exchanging through peer copies). A
// ThreadGroup is the shared meeting point; each rank's thread holds its own ThreadCommunicator.

#include <memory>
#include <vector>

#include "parallel/comm/communicator.h"

namespace minitrain {

class ThreadGroup;  // shared state: mailboxes, barrier, deadlines

/// One communicator per rank, all of the same group: hand communicators[r] to rank r's thread.
/// devices.size() is the group's size; a device may repeat (several CPU ranks).
std::vector<std::unique_ptr<Communicator>> make_thread_communicators(
    const std::vector<Device>& devices, CommOptions options = {});

}  // namespace minitrain

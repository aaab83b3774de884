#pragma once
// What a member of a split communicator must receive (Note [splitting a communicator]), for the
// split tests of every backend: each member contributes the small integers of its rank in the
// PARENT (testing::rank_value), so a sum over the wrong ranks, or a rank in the wrong place,
// shows as a wrong number. Sums of at most 8 such integers are exact in float32.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "parallel/comm/communicator.h"
#include "tests/parallel/run_ranks.h"
#include "tests/support/test_util.h"

namespace minitrain::testing {

/// The parent ranks of `color` in the new group's order: by key, then by parent rank.
/// `color_key[r]` is what parent rank r passed.
inline std::vector<int> split_members(const std::vector<std::pair<int, int>>& color_key,
                                      int color) {
  std::vector<std::pair<int, int>> keyed;  // (key, parent rank)
  for (int r = 0; r < static_cast<int>(color_key.size()); ++r)
    if (color_key[r].first == color) keyed.emplace_back(color_key[r].second, r);
  std::sort(keyed.begin(), keyed.end());
  std::vector<int> members;
  for (const auto& [key, r] : keyed) members.push_back(r);
  return members;
}

/// On every member of one group (`members` from split_members, `parent_rank` this member's rank
/// in the parent): its place and size, all_reduce Sum/Avg/Max over the members only, broadcast from
/// the group's rank 0, and a ring of send_recv, all on part.device().
inline void expect_group_exchanges(Communicator& part, const std::vector<int>& members,
                                   int parent_rank) {
  const int n = static_cast<int>(members.size());
  const Device d = part.device();
  ASSERT_EQ(part.size(), n);
  ASSERT_EQ(members[part.rank()], parent_rank) << "member in the wrong place";
  for (int64_t len : {int64_t(0), int64_t(1), int64_t(7), int64_t(1000)}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      Tensor t = rank_tensor(parent_rank, len, DType::Float32, d);
      part.all_reduce(t, op);
      ASSERT_EQ(t.device(), d);
      const std::vector<double> got = host_values(t);
      bool nonzero = len == 0;
      for (int64_t i = 0; i < len; ++i) {
        double sum = 0, max = rank_value(members[0], i);
        for (int m : members) {
          sum += rank_value(m, i);
          max = std::max(max, rank_value(m, i));
        }
        const double want = op == ReduceOp::Sum ? sum : op == ReduceOp::Max ? max : sum / n;
        ASSERT_NEAR(got[i], want, op == ReduceOp::Avg ? 1e-6 : 0.0)
            << reduce_op_name(op) << " len=" << len << " i=" << i << " (parent rank " << parent_rank
            << ")";
        nonzero = nonzero || got[i] != 0;
      }
      EXPECT_TRUE(nonzero) << "all zeros: len=" << len;
    }
    Tensor b = rank_tensor(parent_rank, len, DType::Float32, d);
    part.broadcast(b, 0);
    const std::vector<double> from_root = host_values(b);
    for (int64_t i = 0; i < len; ++i)
      ASSERT_EQ(from_root[i], rank_value(members[0], i)) << "broadcast len=" << len << " i=" << i;
    const int next = (part.rank() + 1) % n, prev = (part.rank() + n - 1) % n;
    Tensor mine = rank_tensor(parent_rank, len, DType::Float32, d);
    Tensor got = Tensor::zeros({len}, DType::Float32, d);
    part.send_recv(mine, next, got, prev);
    const std::vector<double> from_prev = host_values(got);
    for (int64_t i = 0; i < len; ++i)
      ASSERT_EQ(from_prev[i], rank_value(members[prev], i)) << "send_recv len=" << len;
  }
}

}  // namespace minitrain::testing

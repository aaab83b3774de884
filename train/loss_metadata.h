#pragma once
// The trained loss's settings in a weights file's metadata ('loss_settings'), so that evaluate
// scores with the loss the model was trained on: a model trained with --huber-delta 0.2 was once
// scored with huber's default delta 1 and reported a loss three times its training's.

#include <string>

#include "nn/loss.h"

namespace minitrain {

/// The settings of `o` away from their defaults (given_loss_settings), as a JSON object keyed by
/// their flags: {"huber-delta":0.2}; "" when every setting is its default (nothing to write).
std::string loss_settings_metadata(const LossOptions& o);

/// Reads loss_settings_metadata's text from the weights file `path` into `o`: IoError naming the
/// file and the key for text that is not such an object, a flag this build does not know, or a
/// value of the wrong kind.
void read_loss_settings_metadata(const std::string& text, const std::string& path, LossOptions& o);

}  // namespace minitrain

#pragma once
// How much a message to the user matters: the workspace's message() signal
// carries it and the message bar colours itself by it. Its own header, so
// that the bar need not include the workspace.

namespace cs::gui {

enum class MessageLevel { info, warning, error };

}  // namespace cs::gui

// The archiver's signals (archive/FORMAT.md, "The archiver process"): SIGTERM asks it to stop (a
// request under way is cancelled and answered FAILED RETRY); SIGINT and SIGPIPE are ignored.
#pragma once

namespace tw::archiver {

// Installs the handlers; call once, before any thread starts. Throws when the wake-up pipe
// cannot be made.
void install_signal_handlers();
// Whether SIGTERM came. Safe from any thread.
bool stop_requested();
// Readable once SIGTERM came: a poll on the input wakes up even when the signal lands
// between the check of stop_requested() and the wait.
int stop_wake_fd();

}  // namespace tw::archiver

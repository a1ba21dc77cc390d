// The stream agent: backs up one byte stream (a pipe, a socket, a terminal)
// as a single file, e.g. `pg_dump | keel backup --stdin-name db.sql`.
//
// walk() reports a root directory ("" name, mode 0755, owned by the process,
// times now) holding one file `name` (mode 0644, mtime now, size 0: unknown
// ahead). Its `open` returns a reader that reads the descriptor sequentially
// until EOF, with no seeking; a stream can be read once, so a second `open`
// throws Error(kFailure). A read error throws Error(kTargetIo). At EOF the
// reader calls `at_end` (if given), which throws if the stream is not whole
// (the command that wrote it failed). The source is all-or-nothing: a stream
// that fails is no snapshot. paths() is {"stdin:" + name}.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/source.h"

namespace keel::agents::stdin_stream {

// `fd` is not owned: it must stay open until the reader is done with it.
// Throws Error(kUsage) unless `name` is a plain file name (non-empty, no '/'
// or NUL, not "." or "..").
std::unique_ptr<engine::Source> make_stream_source(int fd, std::string name, std::function<void()> at_end = {});

}  // namespace keel::agents::stdin_stream

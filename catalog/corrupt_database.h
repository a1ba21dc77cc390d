// The error a catalog database throws when SQLite finds its file damaged
// (SQLITE_CORRUPT) or not a database at all (SQLITE_NOTADB). Everything in
// a catalog but history can be rebuilt from the target, so callers that can
// rebuild catch this one and move the file aside (Repository::open_catalog).
#pragma once

#include <string>

#include "util/error.h"

namespace keel::catalog {

class CorruptDatabase : public Error {
 public:
  explicit CorruptDatabase(const std::string& message) : Error(ErrorKind::kTargetIo, message) {}
};

}  // namespace keel::catalog

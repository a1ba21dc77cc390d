#include "util/openssl.h"

#include <openssl/err.h>

#include "util/error.h"

namespace keel {

void throw_openssl(const std::string& operation) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  char reason[256] = "no OpenSSL error recorded";
  if (code != 0) ERR_error_string_n(code, reason, sizeof reason);
  throw Error(ErrorKind::kFailure, operation + " failed: " + reason);
}

}  // namespace keel

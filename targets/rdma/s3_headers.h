// The HTTP headers that carry the RDMA data plane inside ordinary S3 requests
// (docs/rdma.md): the client's token in a SigV4-signed request header, the
// server's verdict and the bytes it moved in response headers.
#pragma once

#include <string_view>

namespace keel::targets::rdma {

// Request: the keel-rc-1 token the server may READ from (PutObject,
// UploadPart) or WRITE into (GetObject). Must be among the signed headers.
inline constexpr std::string_view kTokenHeader = "x-amz-rdma-token";
// Response: the status the request had over RDMA: 200/206 when the bytes
// moved, 501 when the server declined (then send it again with an HTTP
// body), 4xx when it rejected the token.
inline constexpr std::string_view kReplyHeader = "x-amz-rdma-reply";
// GetObject response: how many bytes the server wrote into the client's range.
inline constexpr std::string_view kBytesTransferredHeader = "x-amz-rdma-bytes-transferred";

}  // namespace keel::targets::rdma

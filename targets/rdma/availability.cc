#include "targets/rdma/availability.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>

namespace keel::targets::rdma {

std::optional<std::string> rdma_unavailable_reason() {
  int count = 0;
  ibv_device** devices = ibv_get_device_list(&count);
  if (!devices)  // ENOSYS: the kernel has no RDMA support at all
    return "no RDMA support on this machine (ibv_get_device_list: " + std::string(std::strerror(errno)) + ")";
  ibv_free_device_list(devices);
  if (count == 0) return "no RDMA device on this machine (load a driver, or rdma_rxe for Soft-RoCE)";
  return std::nullopt;
}

}  // namespace keel::targets::rdma

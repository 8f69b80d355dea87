#pragma once
// The ports `sgp launch` picks for the ranks it starts whose topology endpoint has port 0 (or *):
// for each, a socket listening at a port the OS chose, held from before the topology with that
// port is written until the rank's peer has inherited it (transport/handed_listener.hpp), so that
// no other process can take the port meanwhile. A port picked free and released for the peer to
// bind could be taken by another run's or test's peer first.
#include <map>
#include <vector>

#include "sgp/launch/local_processes.hpp"
#include "sgp/topology/schedule.hpp"

namespace sgp::launch {

class PickedPorts {
 public:
  PickedPorts() = default;  // none picked yet
  ~PickedPorts();
  // Listens for each rank of `local` whose endpoint in `schedule` is tcp with port 0 or *, and
  // writes the ports into those endpoints. InputError for such an endpoint of a rank that this
  // launch does not start (only the launch that starts a rank can pick its port); IoError when a
  // socket cannot listen.
  void pick(topology::Schedule& schedule, const std::vector<int>& local);
  PickedPorts(const PickedPorts&) = delete;
  PickedPorts& operator=(const PickedPorts&) = delete;

  bool any() const { return !held_.empty(); }
  // Gives the child of a rank with a picked port its socket (descriptor and environment).
  void hand_to(ChildSpec& child) const;
  // Closes this process's copies (the children hold theirs): a rank that dies frees its port,
  // for a restart by hand.
  void release();

 private:
  std::map<int, int> held_;  // rank -> listening socket
};

}  // namespace sgp::launch

"""sgp: decentralized training by Stochastic Gradient Push, over sgp's C++ gossip engine.

`Gossip` mixes one flat float32 buffer of a peer's de-biased parameters in place with the other
peers of a topology (the algorithms and settings of `sgp peer`); see python/README.md.
"""

from sgp._native import Gossip, PeerError

__all__ = ["Gossip", "PeerError"]

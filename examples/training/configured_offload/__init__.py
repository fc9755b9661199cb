"""A trainer configured by a dataclass: which parts of the state are offloaded is a flag."""

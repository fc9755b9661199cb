"""The run's configuration; the defaults are what ``python -m`` runs with."""

from dataclasses import dataclass


@dataclass(frozen=True)
class TrainConfig:
    offload_opt_state: bool = True
    offload_params: bool = False
    learning_rate: float = 0.1
    momentum: float = 0.9

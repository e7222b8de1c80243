"""Companion of the chapter ``wormi`` (Yoo et al., ICML 2025, "World Model Implanting for
Test-time Adaptation of Embodied Agents").

* :mod:`.minihome`  -- the symbolic household, its rule modifiers and the goal-regression expert;
* :mod:`.models`    -- the frozen reasoning policy, the world models (eq. (wormi-world-loss)) and
  the world-wise compound attention (eqs. (wormi-tokens)-(wormi-gate));
* :mod:`.retrieval` -- abstract transitions (eq. (wormi-phi)) and prototype retrieval
  (eq. (wormi-retrieve));
* :mod:`.agent`     -- lockstep rollouts, data, training and the implanted policy;
* :mod:`.train`     -- training everything, and the shipped checkpoint.
"""

from companion.checkpoints import lazy_exports

from .agent import MODES, Episodes, ImplantedPolicy, WorldModelPolicy, evaluate, retrieval_precision, revealed_rules
from .minihome import ACTIONS, FACTS, MODIFIERS, TASKS, A, F, Domain, blocked_by
from .models import CompoundAttention, Implant, ReasoningPolicy, WorldModel
from .retrieval import PrototypeIndex, abstract_transition

# the training entry point is imported on first use (see companion.checkpoints.lazy_exports)
__getattr__ = lazy_exports(__name__, "train",
                           ("CONTROL", "FRESH", "LIBRARY", "UNSEEN", "Agents", "load_or_train", "train_all"))

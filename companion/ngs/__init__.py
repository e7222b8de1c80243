"""Companion of the chapter ``ngs`` (Kim et al., ICML 2025, "Neural Genetic Search in Discrete Spaces").

* :mod:`.tsp`    -- instances, tour lengths, validity checks, exact optima (Held-Karp, CP-SAT, an
  integer programme with subtour cuts);
* :mod:`.policy` -- the attention policy and its batched, maskable decoder (eq. (ngs-policy), (ngs-cross));
* :mod:`.train`  -- POMO REINFORCE training (eq. (ngs-pomo)) and the shipped checkpoint;
* :mod:`.search` -- test-time search at an equal budget of decoded tours: sampling,
  multi-start greedy, ACO on the policy (eq. (ngs-aco)) and the genetic search (eq. (ngs-rank)).
"""

from companion.checkpoints import lazy_exports

from .policy import AttentionPolicy, Rollout, allowed_mask
from .search import (
    ACOConfig,
    aco_search,
    parent_weights,
    select_parents,
    NGSConfig,
    SearchResult,
    edge_hash,
    select_survivors,
    tune_temperature,
    greedy_multistart,
    neighbour_table,
    ngs_search,
    parent_neighbours,
    sample_search,
)
from .tsp import (
    TEST_SETS,
    check_coords,
    check_tours,
    generate_tsp,
    held_karp,
    is_permutation,
    reference_solutions,
    solve_exact,
    solve_mip,
    tour_length,
)

# the training entry point is imported on first use (see companion.checkpoints.lazy_exports)
__getattr__ = lazy_exports(__name__, "train", ("load_or_train", "load_policy", "train_pomo"))

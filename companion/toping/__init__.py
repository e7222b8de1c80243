"""TopInG (Xin, Xu et al., ICML 2025): topologically interpretable graph learning.

* :mod:`.data` -- seeded BA + house/grid datasets with ground-truth rationales (variform nRnd);
* :mod:`.persistence` -- exact 0-/1-dim persistence of edge filtrations by union-find, with gradients;
* :mod:`.losses` -- rational hats, the topological discrepancy, the priors, the line-diagram W1;
* :mod:`.models` -- the edge-weighted GIN, TopInG, GSAT, GIN + saliency, training;
* :mod:`.metrics` -- explanation AUC, Ashman's D, the cycle explainer, the gap of Theorem 3.4.
"""

from companion.toping.data import *  # noqa: F401,F403
from companion.toping.losses import *  # noqa: F401,F403
from companion.toping.metrics import *  # noqa: F401,F403
from companion.toping.models import *  # noqa: F401,F403
from companion.toping.persistence import *  # noqa: F401,F403

"""Geometric work of FFN layers (paper 2, Mudarisov, Burtsev, State; chapter 4, *Geometric work*).

- :mod:`.clouds` – matched token states before and after every FFN, captured with hooks;
- :mod:`.metrics` – distances in raw, spherical and hyperbolic geometry; shift and GW statistics;
- :mod:`.topology` – H1 persistence diagrams and their Wasserstein distance;
- :mod:`.work` – one layer's work, and nine profiles over depth;
- :mod:`.diagnostics` – norms, front-loading, rank correlations, TwoNN dimension, sensitivity;
- :mod:`.evidence` – the one primary statistic of each of the chapter's claims, with its null;
- :mod:`.profiles` – the work-profiles file that chapter 5 reads;
- :mod:`.pipeline` – one model, end to end (what chapter 4 runs per model).
"""

from .clouds import SAMPLINGS, FFNCloud, capture_ffn_clouds, maxmin_indices
from .diagnostics import (ffn_sensitivity, front_loading, intrinsic_dimensions, mean_norms, profile_correlations,
                          residual_norm_growth, twonn_dimension)
from .evidence import (CLAIM_PROFILES, DEPTH_SCALES, SCALE_FREE, ModelEvidence, SwapNull,
                       association_difference_null, composite_profile, depth_partial_spearman, depth_residuals,
                       front_loading_null, model_evidence)
from .metrics import (DEFAULT_RADIUS, GEOMETRIES, GW_CONVENTIONS, GW_STARTS, gw_identity, gw_local_optima,
                      gw_objective, gw_optimal, hyperbolic_from_angle, matched_distances, pairwise_distances)
from .pipeline import WorkSettings, measure_work
from .profiles import SCHEMA, ProfileBundle, load_profiles, save_profiles
from .topology import diagram_distance, h1_diagram, topological_change
from .work import DEFAULT_STATISTICS, STATISTICS, WorkProfiles, layer_work, work_profiles

__all__ = ["SAMPLINGS", "FFNCloud", "capture_ffn_clouds", "maxmin_indices", "ffn_sensitivity", "front_loading",
           "intrinsic_dimensions", "mean_norms", "profile_correlations", "residual_norm_growth", "twonn_dimension",
           "SCALE_FREE", "CLAIM_PROFILES", "ModelEvidence", "SwapNull", "association_difference_null",
           "composite_profile", "front_loading_null", "model_evidence", "DEPTH_SCALES", "depth_residuals",
           "depth_partial_spearman",
           "DEFAULT_RADIUS", "GEOMETRIES", "GW_CONVENTIONS", "GW_STARTS", "gw_identity", "gw_local_optima",
           "gw_objective", "gw_optimal", "hyperbolic_from_angle",
           "matched_distances", "pairwise_distances", "WorkSettings", "measure_work", "SCHEMA", "ProfileBundle",
           "load_profiles", "save_profiles", "diagram_distance", "h1_diagram", "topological_change",
           "DEFAULT_STATISTICS", "STATISTICS", "WorkProfiles", "layer_work", "work_profiles"]

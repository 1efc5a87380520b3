"""Fitting the router on calibration questions (`amsrag train route tune`, `amsrag eval --tune`): thresholds, per-class
routes, CA-RRF priors and the MMR gate. Offline code: the runtime router only reads what this writes."""

from amsrag.learn.router.calibration import CalibrationQuery, RankedList, calibration_queries, list_key
from amsrag.learn.router.mmr import MMRFit, PoolOutcome, fit_mmr
from amsrag.learn.router.priors import beta_grid, choose_routes, fit_priors
from amsrag.learn.router.thresholds import ThresholdPoint, evaluate_thresholds, fit_beta, tune_thresholds
from amsrag.learn.router.tune import Tuning, tune, tune_on_calibration, write_curve

__all__ = ["CalibrationQuery", "MMRFit", "PoolOutcome", "RankedList", "ThresholdPoint", "Tuning", "beta_grid",
           "calibration_queries", "choose_routes", "evaluate_thresholds", "fit_beta", "fit_mmr", "fit_priors",
           "list_key", "tune", "tune_on_calibration", "tune_thresholds", "write_curve"]

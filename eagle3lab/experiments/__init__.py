"""Experiments the notebooks and the CLI share, each returning a tidy DataFrame. Not: the words and pictures around them (report, viz) or the servers they run (serving).

Each returns a tidy DataFrame (or a `ServedRun`); prose lives in `eagle3lab.report.prose`, figures in
`eagle3lab.viz.plots`. Every lab measurement goes through `eagle3lab.serving.measurements.lab_bench`: inside
a report it is read from (or measured into) the report's store, so one configuration gives one
set of figures in every notebook. The names below are what notebooks call as `experiments.X`.
"""

from __future__ import annotations

from eagle3lab.experiments.shared import (ACCEPT_GOAL, BASELINE, BUDGETS, LAB_SERVER_ARGS, LATEST_SGLANG,  # noqa: F401
                                          PROMPT_TOKENS, SEED_AFTER_FIX, _float, _int, bench_prompts,
                                          budget, is_real_lab, lab_faults, load_target, preset_budget,
                                          prompt_sources, serve_engine, sweep_lab,
                                          by_kind_table, heldout_repetition, toy_repetition,
                                          sglang_installed, target_arch)
from eagle3lab.experiments.fixids import (SEED_ARCH, SEED_CONFIG_IDS, SEED_FIX_IDS, SEED_LAYERS,  # noqa: F401
                                          SEED_SERVED, SEED_TRAINED, capture_before_after, lab_analog,
                                          measure_wirings, seed_ids_by_version, serving_releases,
                                          sglang_source_copy)
from eagle3lab.experiments.flagsets import (SEED_FLAG_SETS, compare_resolutions, flag_set_label,  # noqa: F401
                                            incident_flag_sets, resolve_flag_sets, warnings_table)
from eagle3lab.experiments.load import (LOAD_DIR, load_figures, load_groups, stored_load_sweeps,  # noqa: F401
                                        under_load)
from eagle3lab.experiments.measure import (fix_labels, interleaved_table, measure_flag_sets,  # noqa: F401
                                           measure_interleaved, measure_points, measure_variants,
                                           stored_points)
from eagle3lab.experiments.served_run import ServedRun, cost_ratio, serve_and_log  # noqa: F401
from eagle3lab.experiments.sweeps import (chain_rows, config_grid,  # noqa: F401
                                          config_sweep, fault_sweep, per_position_table, speedup_table)

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, skaffon.gpu_platform contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The step cost-baseline: what one accepted unit of the training window cost on this pool,
against the baseline the inventory names (a model API's or a GPU rental's price of that unit).

    cost per unit = GPU hours of the window x the pool's price per GPU hour / window units x unit size

The GPU hours and units are the training-window step's (ctx.state["training"]: the GPUs the
Job held times the seconds of the window, and the samples it trained). The baseline's unit is
a text with a size in front (`1000 samples`, `1M samples`, `sample`); its size converts the
window's units into baseline units. The figure is the pool's allocated price: idle and
failed-run GPU time of the site are the usage report's part.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.skaffon.gpu_platform.plugins.module_utils.core.errors import DomainError
from ansible_collections.skaffon.gpu_platform.plugins.module_utils.workload.runner import FAIL, PASS, SKIP, Result, step

UNIT = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)\s*([kKmMgG]|thousand|million|billion)?\s+)?([A-Za-z][\w /.-]*?)\s*$")
SCALE = {None: 1, "k": 1e3, "K": 1e3, "thousand": 1e3, "m": 1e6, "M": 1e6, "million": 1e6, "g": 1e9, "G": 1e9,
         "billion": 1e9}


def unit_size(text):
    """(size, name) of a baseline unit: '1000 samples' -> (1000.0, 'samples'), '1M samples' -> (1e6, ...)."""
    match = UNIT.match(text or "")
    if not match:
        raise DomainError("baseline.unit %r: say what one unit is, a size and a name (for example "
                          "'1000 samples' or '1M samples')" % (text,))
    number = float(match.group(1)) if match.group(1) else 1.0
    if number <= 0:
        raise DomainError("baseline.unit %r: the size must be above 0" % text)
    return number * SCALE[match.group(2)], match.group(3)


def _singular(word):
    return (word or "").strip().lower().rstrip("s")


def _same_unit(name, unit):
    return _singular(name) == _singular(unit)


def compare(training, price_per_gpu_hour, baseline, currency):
    """Result of the step from the training figures, the pool's price and the baseline (pure)."""
    evidence = []
    gpu_seconds = float(training.get("gpu_seconds") or 0)
    units = float(training.get("units") or 0)
    unit = training.get("unit") or "samples"
    size, name = unit_size(baseline["unit"])
    gpu_hours = gpu_seconds / 3600.0
    cost = gpu_hours * price_per_gpu_hour
    figures = {"gpu_hours": round(gpu_hours, 6), "price_per_gpu_hour": price_per_gpu_hour, "currency": currency,
               "units": units, "unit": unit, "cost": round(cost, 6), "baseline_unit": baseline["unit"],
               "baseline_price_per_unit": baseline["price_per_unit"]}
    evidence.append("training window: %.1f GPU-seconds (%s GPUs) and %d %s" % (
        gpu_seconds, training.get("gpus", "?"), units, unit))
    evidence.append("%.6f GPU hours x %s %s per GPU hour = %.6f %s" % (
        gpu_hours, price_per_gpu_hour, currency, cost, currency))
    if not _same_unit(name, unit):
        evidence.append("the baseline counts %s, the training window %s: the comparison takes one for the other"
                        % (name, unit))
    if units <= 0:
        return Result("cost-baseline", FAIL, "no accepted units: the training window trained no %s" % unit,
                      evidence, figures)
    per_unit = cost / (units / size)
    ratio = per_unit / baseline["price_per_unit"] if baseline["price_per_unit"] > 0 else float("inf")
    figures.update(cost_per_unit=round(per_unit, 6), ratio_to_baseline=round(ratio, 4))
    evidence.append("%.6f %s / (%d %s / %g per unit) = %.6f %s per %s; baseline %s %s per %s" % (
        cost, currency, units, unit, size, per_unit, currency, baseline["unit"], baseline["price_per_unit"],
        currency, baseline["unit"]))
    line = "%.4f %s per %s on this pool, %.2f x the baseline's %s %s" % (
        per_unit, currency, baseline["unit"], ratio, baseline["price_per_unit"], currency)
    if per_unit <= baseline["price_per_unit"]:
        return Result("cost-baseline", PASS, line, evidence, figures)
    return Result("cost-baseline", FAIL, line + ": above the baseline (%.0f %% more)" % ((ratio - 1) * 100),
                  evidence, figures)


@step("cost-baseline")
def cost_baseline(ctx):
    price = ctx.params.get("price_per_gpu_hour")
    baseline = ctx.params.get("baseline") or {}
    currency = ctx.params.get("currency") or "EUR"
    missing = [n for n, v in (("price_per_gpu_hour", price), ("baseline.unit", baseline.get("unit")),
                              ("baseline.price_per_unit", baseline.get("price_per_unit"))) if v in (None, "")]
    if missing:
        return Result("cost-baseline", SKIP, "no %s in the inventory: nothing to compare with" % " and ".join(missing))
    training = ctx.state.get("training")
    if not training:
        return Result("cost-baseline", SKIP, "needs training-window, which did not run")
    return compare(training, float(price), {"unit": baseline["unit"], "price_per_unit": float(baseline["price_per_unit"])},
                   currency)

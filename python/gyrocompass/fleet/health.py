"""A fleet's health: each robot's hard iron and field strength bag after bag, and the jumps
(something magnetic mounted or removed)."""
from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np

from .bags import robot_of
from .run import _table_write, read_summary

def health(directory, *, robot: str | None = None, table: str | os.PathLike | None = None, out=sys.stdout):
    """Each robot's hard iron and field strength bag after bag (by the bag's start time, then its name),
    and the jumps: a change of hard iron larger than three times the two fits' combined uncertainty
    (hard_iron_sigma_ut), something magnetic mounted or removed between the two recordings. Writes every
    robot's series to `table` (default DIRECTORY/health.csv); returns (series rows, jumps)."""
    rows = [r for r in read_summary(directory) if r['status'] != 'failed']
    if robot:
        for r in rows:
            r['robot'] = robot_of(r['bag'], robot)
    series, jumps = [], []
    for name in sorted({r['robot'] for r in rows}):
        mine = sorted((r for r in rows if r['robot'] == name),
                      key=lambda r: (r['start_time_s'] if math.isfinite(r['start_time_s']) else math.inf, r['bag']))
        previous = None
        for r in mine:
            h = np.array([r['hard_iron_x_ut'], r['hard_iron_y_ut'], r['hard_iron_z_ut']])
            entry = {'robot': name, 'bag': r['bag'], 'start_time_s': r['start_time_s'], 'hard_iron_x_ut': h[0],
                     'hard_iron_y_ut': h[1], 'hard_iron_z_ut': h[2], 'hard_iron_sigma_ut': r['hard_iron_sigma_ut'],
                     'field_ut': r['field_ut'], 'jump_ut': math.nan, 'jump_limit_ut': math.nan}
            if not np.isfinite(h).all():
                series.append(entry)
                continue
            if previous is not None:
                ph, psigma = previous
                step = float(np.linalg.norm(h - ph))
                limit = 3 * math.hypot(psigma, r['hard_iron_sigma_ut'])
                entry['jump_ut'], entry['jump_limit_ut'] = step, limit
                if step > limit:
                    jumps.append(entry)
            previous = (h, r['hard_iron_sigma_ut'])
            series.append(entry)
    table = Path(table) if table else Path(directory) / 'health.csv'
    columns = list(series[0].keys()) if series else ['robot']
    _table_write(table, [{k: ('' if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                         for r in series], columns)
    print(f'{len({r["robot"] for r in series})} robot(s), {len(series)} bag(s) with a calibration at the end'
          f' of {len(rows)}', file=out)
    for name in sorted({r['robot'] for r in series}):
        mine = [r for r in series if r['robot'] == name and math.isfinite(r['hard_iron_x_ut'])]
        if not mine:
            print(f'  {name}: no calibration in any bag', file=out)
            continue
        fields = [r['field_ut'] for r in mine]
        print(f'  {name}: {len(mine)} bag(s), hard iron from ({mine[0]["hard_iron_x_ut"]:.1f}, '
              f'{mine[0]["hard_iron_y_ut"]:.1f}, {mine[0]["hard_iron_z_ut"]:.1f}) to ({mine[-1]["hard_iron_x_ut"]:.1f},'
              f' {mine[-1]["hard_iron_y_ut"]:.1f}, {mine[-1]["hard_iron_z_ut"]:.1f}) uT, field '
              f'{min(fields):.1f}-{max(fields):.1f} uT', file=out)
    if jumps:
        print(f'{len(jumps)} jump(s) of hard iron (something magnetic mounted or removed before the bag):', file=out)
        for j in jumps:
            print(f'  {j["robot"]}: {j["bag"]}: moved {j["jump_ut"]:.1f} uT (limit {j["jump_limit_ut"]:.1f}) to '
                  f'({j["hard_iron_x_ut"]:.1f}, {j["hard_iron_y_ut"]:.1f}, {j["hard_iron_z_ut"]:.1f}) uT', file=out)
    else:
        print('no jump of hard iron', file=out)
    print(f'table: {table}', file=out)
    return series, jumps

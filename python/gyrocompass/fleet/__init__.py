"""A fleet's recordings: replay many bags on a Dask cluster, compare two runs, follow each robot's iron.

    from gyrocompass import fleet
    table = fleet.run(['bags/'], 'out/')                       # a local cluster, a process per core
    table = fleet.run(['bags/'], 'out/', scheduler='tcp://host:8786', options={'filter': 'complementary'})
    fleet.compare('out-a/', 'out-b/')                          # the bags that changed the most
    fleet.health('out/')                                       # hard iron per robot, jumps listed

`fusion-node fleet` is this module's command line (`python -m gyrocompass.fleet`). Each bag is replayed by a
Dask worker calling the library (the graph and estimates of `fusion-node replay`); per bag, OUT/BAG/ holds
what was asked (orientation.csv and accuracy.csv, byte for byte what `fusion-node replay --csv
--accuracy-csv` writes, or .parquet with pyarrow) and summary.json, one row of OUT/summary.csv. Needs
`dask` and `distributed` (pip install 'gyrocompass[fleet]'); pyarrow for Parquet.

Nothing lost, nothing repeated: a bag that fails is a row with its error; a row's `key` hashes the bag's
bytes, the options (with a calibration file's bytes), the outputs asked for and the library's version,
and a re-run skips a bag whose row holds the same key (its outputs written before the row); every file is
written under a temporary name and renamed; a worker lost mid-bag is replaced and its bag replayed
elsewhere (Dask's scheduler does that).
"""
from __future__ import annotations

from .bags import BAG_SUFFIXES, FleetError, _names, find_bags, robot_of
from .cli import _entry, main
from .compare import compare, heading_rmse, read_truth
from .health import health
from .run import read_summary, run
from .worker import SUMMARY_COLUMNS, replay_bag

__all__ = ['run', 'compare', 'health', 'find_bags', 'read_summary', 'read_truth', 'heading_rmse', 'robot_of',
           'replay_bag', 'FleetError', 'SUMMARY_COLUMNS', 'BAG_SUFFIXES']

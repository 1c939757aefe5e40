"""Real-world data (Sec. "Real-world data"): Concrete, Superconductor, and any numeric CSV.

Finding a table: the folder given by the `data_dir` option, else by the environment
variable KANX_DATA_DIR, then the user cache ($XDG_CACHE_HOME/kanx/<name>, by default
~/.cache/kanx/<name>). Each folder may hold the normalized CSV (`concrete.csv`,
`superconductor.csv`, as described in shared/data/README.md) or the official UCI file
(`Concrete_Data.xls`, the superconductivity `train.csv`). When none is found, the official
UCI archive is downloaded into the cache (short timeout; a clear error says how to supply
the file by hand when that fails). kanx never falls back to other data.

Every file is checked before use: a normalized CSV whose sha256 matches the reference copy
is the known table; any other copy (a user's own, or the official file) must have the right
row count and columns, numbers only, no missing values, and values inside the UCI table's
ranges. A truncated or corrupted copy raises DataError naming the file.
"""

from __future__ import annotations

import io
import logging
import os
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path
from urllib.error import URLError
from urllib.request import urlopen

import numpy as np
import pandas as pd

from kanx.data.dataset import Dataset, make_dataset
from kanx.errors import ConfigError, DataError
from kanx.hashing import sha256_of

log = logging.getLogger(__name__)

DOWNLOAD_TIMEOUT_S = 15.0
FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class TableSource:
    """One UCI table: where to find it, how to read it, and what a good copy looks like."""

    name: str
    title: str
    normalized_file: str
    normalized_sha256: str  # shared/data/README.md
    official_file: str
    official_sha256: str | None  # where a checksum of the official file is known
    url: str  # the official archive, holding official_file
    n_rows: int
    ranges: dict[str, tuple[float, float]]  # column -> (low, high), normalized names, file order, target last
    unit: str  # the target's
    integer_columns: tuple[str, ...]
    read_official: Callable[[Path], pd.DataFrame]  # -> normalized columns

    @property
    def columns(self) -> list[str]:
        return list(self.ranges)


# ----------------------------------------------------------------- reading and checks
def read_csv(path: Path, **kwargs) -> pd.DataFrame:
    """A CSV table with a header row; any parser failure, and a header that names a column
    more than once, is a DataError naming the file."""
    try:
        df = pd.read_csv(path, **kwargs)
        # pandas renames a repeated name ("a", "a" -> "a", "a.1"): read the header as written
        header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False).iloc[0].tolist()
    except (OSError, ValueError) as err:  # ParserError, EmptyDataError, UnicodeDecodeError
        raise DataError(f"{path}: cannot be read as a CSV table ({_first_line(err)}); "
                        "expected a comma-separated table with a header row") from None
    repeated = [name for name in dict.fromkeys(header) if name and header.count(name) > 1]
    if repeated:
        raise DataError(f"{path}: the header names the column{'s' if len(repeated) > 1 else ''} "
                        f"{', '.join(map(repr, repeated))} more than once; give every column its own name")
    return df


def numeric_block(df: pd.DataFrame, columns: Sequence[str], path: Path,
                  fix: str = "fix or remove that row") -> np.ndarray:
    """The given columns as a float64 array (n, len(columns)), or a DataError naming the
    first non-numeric, missing, infinite or beyond-float32 value (data rows count from 1
    below the header)."""
    out = np.empty((len(df), len(columns)))
    for j, col in enumerate(columns):
        raw = df[col]
        values = pd.to_numeric(raw, errors="coerce")
        bad = values.isna() & raw.notna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise DataError(f"{path}: column {col!r} has the non-numeric value {raw.iloc[row]!r} in data row "
                            f"{row + 1}; expected numbers only; {fix}")
        if values.isna().any():
            row = int(np.flatnonzero(values.isna().to_numpy())[0])
            raise DataError(f"{path}: column {col!r} has {int(values.isna().sum())} "
                            f"missing values (first in data row {row + 1}); {fix}")
        out[:, j] = values.to_numpy(dtype=np.float64)
        # The model trains in float32, where such a value is infinite; far beyond (1e300) even the
        # float64 standardization overflows (its variance) and flattens the column to zeros.
        outside = ~(np.abs(out[:, j]) <= FLOAT32_MAX)
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            what = "the value" if np.isfinite(out[row, j]) else "the non-finite value"
            raise DataError(f"{path}: column {col!r} has {what} {out[row, j]:g} in data row "
                            f"{row + 1}; expected finite numbers within float32's range "
                            f"(|value| <= {FLOAT32_MAX:.4g}), in which kanx trains; {fix}")
    return out


def check_table(df: pd.DataFrame, source: TableSource, path: Path) -> np.ndarray:
    """The table's columns (in source.columns order) as float64, after the structural
    checks: columns present, row count, numbers only, no NaN, values in range."""
    fix = (f"replace it with a good copy of the UCI {source.title} table "
           f"({source.url}), or remove it so that kanx looks elsewhere")
    missing = [c for c in source.columns if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing columns {missing}; expected the columns {source.columns}; {fix}")
    if len(df) != source.n_rows:
        raise DataError(f"{path}: has {len(df)} data rows, expected "
                        f"{source.n_rows} (truncated or another table?); {fix}")
    values = numeric_block(df, source.columns, path, fix)
    for j, col in enumerate(source.columns):
        low, high = source.ranges[col]
        outside = (values[:, j] < low) | (values[:, j] > high)
        if col in source.integer_columns:
            outside |= values[:, j] != np.round(values[:, j])
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            kind = "an integer" if col in source.integer_columns else "a number"
            raise DataError(f"{path}: column {col!r} has {values[row, j]:g} in data row {row + 1}, expected {kind} in "
                            f"[{low}, {high}] (corrupted?); {fix}")
    return values


def load_table(source: TableSource, path: Path, fmt: str) -> tuple[np.ndarray, dict]:
    """Read and check a normalized or official file: (values in source.columns order, provenance)."""
    digest = sha256_of(path)
    reference = source.normalized_sha256 if fmt == "normalized" else source.official_sha256
    df = read_csv(path) if fmt == "normalized" else source.read_official(path)
    values = check_table(df, source, path)
    if digest != reference:
        log.info(f"{path}: not the reference copy (sha256 {digest[:12]}...), "
                 "but it passed the row, column and range checks")
    return values, {"file": str(path), "format": fmt, "sha256": digest, "reference_copy": digest == reference,
                    "reference_sha256": reference}


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


# ------------------------------------------------------------------- official formats
_CONCRETE_HEADER_WORDS = ("cement", "slag", "fly ash", "water", "superplasticizer", "coarse", "fine", "age", "strength")


def concrete_from_official(raw: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The UCI sheet (9 columns with long names such as 'Cement (component 1)(kg in a m^3
    mixture)') with its columns renamed to the normalized names, after a header check."""
    names = list(CONCRETE.ranges)
    headers = [str(h).lower() for h in raw.columns]
    if len(headers) != len(names) or not all(w in h for w, h in zip(_CONCRETE_HEADER_WORDS, headers, strict=True)):
        raise DataError(f"{path}: header {list(raw.columns)} is not the UCI Concrete_Data.xls header (9 columns: "
                        f"{', '.join(_CONCRETE_HEADER_WORDS)}); use the official file or the normalized concrete.csv")
    return raw.set_axis(names, axis=1)


def _read_concrete_xls(path: Path) -> pd.DataFrame:
    try:
        raw = pd.read_excel(path, sheet_name=0, engine="xlrd")
    except ImportError:
        raise DataError(f"{path}: reading the official .xls needs the xlrd package; pip install xlrd, or use the "
                        "normalized concrete.csv") from None
    except Exception as err:  # xlrd raises its own errors for damaged workbooks
        raise DataError(f"{path}: cannot be read as an Excel .xls workbook ({_first_line(err)}); replace it with the "
                        "official Concrete_Data.xls") from None
    return concrete_from_official(raw, path)


SUPERCONDUCTOR_OFFICIAL_COLUMNS = 82  # number_of_elements, 8 properties x 10 statistics, critical_temp


def superconductor_from_official(raw: pd.DataFrame, path: Path) -> pd.DataFrame:
    """The 5 inputs and the target out of the 82-column UCI train.csv."""
    names = list(SUPERCONDUCTOR.ranges)
    missing = [c for c in names if c not in raw.columns]
    if len(raw.columns) != SUPERCONDUCTOR_OFFICIAL_COLUMNS or missing:
        raise DataError(f"{path}: has {len(raw.columns)} columns (missing {missing}); expected the 82 columns of the "
                        "UCI superconductivity train.csv; use the official file or the normalized superconductor.csv")
    return raw[names]


def _read_superconductor_csv(path: Path) -> pd.DataFrame:
    superconductor_from_official(read_csv(path, nrows=0), path)  # header check first
    return read_csv(path, usecols=SUPERCONDUCTOR.columns)  # 6 of the 82 columns: 5x faster


CONCRETE = TableSource(
    name="concrete",
    title="Concrete Compressive Strength",
    normalized_file="concrete.csv",
    normalized_sha256="517b14fb95e7721044225095c4ccce894216a2905cb4c0c2a4dff06135a60d30",
    official_file="Concrete_Data.xls",
    official_sha256=None,  # copies of the .xls differ in bytes though their cells agree
    url="https://archive.ics.uci.edu/static/public/165/concrete+compressive+strength.zip",
    n_rows=1030,
    # The UCI table's min/max rounded outward, so rounded copies pass too (kg/m^3, days, MPa).
    ranges={
        "cement": (100.0, 550.0), "slag": (0.0, 360.0), "fly_ash": (0.0, 201.0), "water": (120.0, 250.0),
        "superplasticizer": (0.0, 33.0), "coarse_aggregate": (800.0, 1150.0), "fine_aggregate": (590.0, 1000.0),
        "age": (1.0, 365.0), "strength": (2.0, 83.0),
    },
    unit="MPa",
    integer_columns=("age",),
    read_official=_read_concrete_xls,
)

SUPERCONDUCTOR = TableSource(
    name="superconductor",
    title="Superconductivity Data",
    normalized_file="superconductor.csv",
    normalized_sha256="e3019d23f020b93f70ef61ba4c1599a026f793490447fa857660fe577c72170b",
    official_file="train.csv",
    # Listed by a third-party checksum file (shared/data/README.md); not checked against UCI.
    official_sha256="4dfb6e3a1f6ffd969e5a5e42f093c4800d1e2a6c8b1e309f8fcd9f23d86952f3",
    url="https://archive.ics.uci.edu/static/public/464/superconductivty+data.zip",
    n_rows=21263,
    ranges={
        "number_of_elements": (1.0, 9.0), "wtd_mean_Valence": (1.0, 7.0), "entropy_Valence": (0.0, 2.2),
        "wtd_mean_fie": (375.0, 1350.0), "mean_ElectronAffinity": (1.5, 327.0), "critical_temp": (0.0, 186.0),
    },
    unit="K",
    integer_columns=("number_of_elements",),
    read_official=_read_superconductor_csv,
)


# ------------------------------------------------------------------ finding and fetching
def cache_dir() -> Path:
    """$XDG_CACHE_HOME/kanx, or ~/.cache/kanx."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "kanx"


def search_dirs(source: TableSource, data_dir: str | os.PathLike | None) -> list[Path]:
    """The data folder (option, else KANX_DATA_DIR) if any, then the cache."""
    env = os.environ.get("KANX_DATA_DIR") or None
    given = data_dir if data_dir is not None else env
    dirs = [cache_dir() / source.name]
    if given is not None:
        folder = Path(given).expanduser()
        if not folder.is_dir():
            what = "is a file, not a folder" if folder.exists() else "does not exist"
            raise DataError(f"data folder {folder} ({_origin(data_dir, env)}) {what}; set {_origin_key(data_dir, env)} "
                            f"to the folder that holds {source.normalized_file} or {source.official_file}")
        dirs.insert(0, folder)
    return dirs


def _from_env(data_dir, env: str | None) -> bool:
    """Whether the folder came from KANX_DATA_DIR: unset option, or the option holding the
    variable's value (conf/dataset/*.yaml pass ${oc.env:KANX_DATA_DIR} as data_dir)."""
    return data_dir is None or (env is not None and str(data_dir) == env)


def _origin(data_dir, env: str | None) -> str:
    return (f"from the environment variable KANX_DATA_DIR={env}" if _from_env(data_dir, env)
            else f"from the option data_dir={data_dir}")


def _origin_key(data_dir, env: str | None) -> str:
    return "the environment variable KANX_DATA_DIR" if _from_env(data_dir, env) else "dataset.data_dir"


def locate(source: TableSource, data_dir: str | os.PathLike | None) -> tuple[Path, str]:
    """(path, "normalized" | "official") of the first copy found, downloading one if none is."""
    dirs = search_dirs(source, data_dir)
    for folder in dirs:
        for fmt, file in (("normalized", source.normalized_file), ("official", source.official_file)):
            fix = f"kanx looks for the {source.title} table under that name; rename or remove it"
            if file_there(folder / file, fix):
                return folder / file, fmt
    return fetch(source, dirs), "official"


def file_there(path: Path, fix: str) -> bool:
    """Whether a file is at path. Anything else by that name (a folder, a pipe, a broken link,
    a file that cannot be opened) is a DataError saying so: else it reads as "not found"."""
    try:
        if path.is_symlink() and not path.exists():
            raise DataError(f"{path}: is a broken symbolic link (to {os.readlink(path)}); {fix}")
        if not path.exists():
            return False
        if path.is_dir():
            raise DataError(f"{path}: is a directory, not a file; {fix}")
        if not path.is_file():
            raise DataError(f"{path}: is not a regular file; {fix}")  # a pipe would block the read
        with open(path, "rb"):
            return True
    except OSError as err:  # no permission to open it, or to look into its folder
        raise DataError(f"{path}: cannot be opened ({err.strerror or _first_line(err)}); {fix}") from None


def fetch(source: TableSource, searched: Sequence[Path]) -> Path:
    """Download the official archive, put its official file in the cache, and check it."""
    target = cache_dir() / source.name / source.official_file
    by_hand = (
        f"download {source.url} by hand and unzip it, then set KANX_DATA_DIR to that folder "
        f"or put {source.official_file} at {target}"
    )
    try:
        with urlopen(source.url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            archive = response.read()
    except (URLError, OSError, ValueError, HTTPException) as err:  # no network, timeout, bad URL, cut short
        where = ", ".join(str(d) for d in searched)
        raise DataError(f"{source.name}: neither {source.normalized_file} nor {source.official_file} is in {where}, "
                        f"and downloading {source.url} failed ({_first_line(err)}); {by_hand}") from None
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as z:
            member = next(m for m in z.namelist() if Path(m).name == source.official_file)
            content = z.read(member)
    except (zipfile.BadZipFile, StopIteration):
        raise DataError(f"{source.url}: the download is not a zip archive "
                        f"holding {source.official_file}; {by_hand}") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(f"{target.name}.part{os.getpid()}")
    part.write_bytes(content)
    os.replace(part, target)  # atomic: a concurrent run never sees half a file
    try:
        check_table(source.read_official(target), source, target)
    except DataError:
        target.unlink(missing_ok=True)  # do not leave a bad copy to be found next time
        raise
    log.info(f"downloaded {source.url} -> {target}")
    return target


# --------------------------------------------------------------------------- datasets
def random_split(n_rows: int, n_train: int, n_test: int, data_seed: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of a random train/test split, drawn without replacement by data_seed."""
    if n_train + n_test > n_rows:
        raise ConfigError(f"{what}: n_train + n_test = {n_train} + {n_test} is "
                          f"more than its {n_rows} rows; lower n_train or n_test")
    order = np.random.default_rng(data_seed).permutation(n_rows)
    return order[:n_train], order[n_train:n_train + n_test]


CONCRETE_DERIVED = ("water_cement_ratio", "water_binder_ratio", "total_binder", "total_aggregate", "log_age_plus_1")


def concrete_inputs(raw: np.ndarray) -> np.ndarray:
    """The 8 raw inputs plus the 5 derived ones of Sec. "Real-world data": (n, 13).

    raw: (n, 8) in CONCRETE column order (cement, slag, fly_ash, water, superplasticizer,
    coarse_aggregate, fine_aggregate, age). Binder = cement + slag + fly ash; aggregate =
    coarse + fine; log is natural.
    """
    cement, slag, fly_ash, water, _, coarse, fine, age = raw.T
    binder = cement + slag + fly_ash
    derived = [water / cement, water / binder, binder, coarse + fine, np.log(age + 1.0)]
    return np.column_stack([raw, *derived])


def _uci_dataset(
    source: TableSource, name: str, data_seed: int, n_train: int, n_test: int, data_dir: str | None,
    input_names: Sequence[str], inputs: Callable[[np.ndarray], np.ndarray] = lambda raw: raw,
) -> Dataset:
    """A random train/test split of a checked UCI table; its last column is the target."""
    path, fmt = locate(source, data_dir)
    values, provenance = load_table(source, path, fmt)
    x, y = inputs(values[:, :-1]), values[:, -1:]
    train, test = random_split(len(values), n_train, n_test, data_seed, f"{name} ({path})")
    return make_dataset(
        name, data_seed, (x[train], y[train]), (x[test], y[test]),
        input_names=input_names, output_names=source.columns[-1:], target_unit=source.unit, provenance=provenance,
    )


def make_concrete(name: str, data_seed: int, n_train: int, n_test: int, data_dir: str | None) -> Dataset:
    """UCI Concrete: 13 inputs, compressive strength in MPa, random 80/20 split (824 / 206)."""
    names = (*CONCRETE.columns[:-1], *CONCRETE_DERIVED)
    return _uci_dataset(CONCRETE, name, data_seed, n_train, n_test, data_dir, names, concrete_inputs)


def make_superconductor(name: str, data_seed: int, n_train: int, n_test: int, data_dir: str | None) -> Dataset:
    """UCI Superconductivity: the paper's 5 inputs, critical temperature in K, 1000 + 1000
    rows drawn without replacement."""
    return _uci_dataset(SUPERCONDUCTOR, name, data_seed, n_train, n_test, data_dir, SUPERCONDUCTOR.columns[:-1])


def _default_features(df: pd.DataFrame, targets: Sequence[str]) -> list[str]:
    """Every column but the targets that holds numbers: text columns (no value parses as a
    number) are left out; a column that is partly numbers is kept, so its bad cells get
    reported instead of the column silently vanishing."""
    def numeric(col: str) -> bool:
        return pd.api.types.is_numeric_dtype(df[col]) or pd.to_numeric(df[col], errors="coerce").notna().any()

    return [c for c in df.columns if c not in targets and numeric(c)]


def _csv_sizes(n_rows: int, test_fraction: float, n_train: int | None, n_test: int | None,
               file: Path) -> tuple[int, int]:
    """Split sizes: test_fraction of the rows (at least 1) unless n_train / n_test are given;
    a size left out takes the remaining rows."""
    if n_train is None and n_test is None:
        n_test = max(1, round(test_fraction * n_rows))
    if n_train is None:
        n_train = n_rows - n_test
    if n_test is None:
        n_test = n_rows - n_train
    if n_train < 2 or n_test < 1 or n_train + n_test > n_rows:
        raise DataError(f"{file}: {n_rows} data rows cannot give {n_train} training and {n_test} test rows; need at "
                        "least 2 training and 1 test row (add rows, or change test_fraction, n_train or n_test)")
    return n_train, n_test


def make_csv(
    name: str, data_seed: int, path: str | None, target: str | list[str] | None,
    features: list[str] | None, test_fraction: float, n_train: int | None, n_test: int | None,
) -> Dataset:
    """Your own numeric table: predict `target` from `features` (default: every other
    numeric column), random split by data_seed (test_fraction, or n_train / n_test)."""
    if path is None or target is None:
        raise ConfigError("dataset 'csv' needs path=FILE and target=COLUMN, "
                          "e.g. dataset.path=data.csv dataset.target=y")
    file = Path(path).expanduser().absolute()
    fix = f"option path={path!r} must name a CSV table with a header row"
    if not file_there(file, fix):
        raise DataError(f"{file}: no such file (option path={path!r}); give the path to a CSV table with a header row")
    df = read_csv(file)
    if len(df) == 0:  # else it reads as "no numeric column": an empty column holds no number
        raise DataError(f"{file}: has a header row ({', '.join(map(str, df.columns))}) but no rows of data; add data "
                        "rows below the header")
    targets = [target] if isinstance(target, str) else list(target)
    missing = [c for c in [*targets, *(features or [])] if c not in df.columns]
    if missing:
        raise DataError(f"{file}: no column {', '.join(map(repr, missing))}; the columns are {list(df.columns)}")
    features = _default_features(df, targets) if features is None else list(features)
    if set(features) & set(targets):
        raise ConfigError(f"dataset 'csv': features {features} must not include "
                          f"the target {targets}; leave the target out of features")
    if not features:
        raise DataError(f"{file}: no numeric column besides the target {targets} "
                        f"to use as input; the columns are {list(df.columns)}")
    n_train, n_test = _csv_sizes(len(df), test_fraction, n_train, n_test, file)
    x, y = numeric_block(df, features, file), numeric_block(df, targets, file)
    train, test = random_split(len(df), n_train, n_test, data_seed, f"{name} ({file})")
    return make_dataset(
        name, data_seed, (x[train], y[train]), (x[test], y[test]),
        input_names=features, output_names=targets,
        provenance={"file": str(file), "format": "csv", "sha256": sha256_of(file), "rows": len(df)},
    )

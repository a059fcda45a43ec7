"""Release audit: no file of a release may carry a restricted series, however rescaled.

A source whose SOURCES.md forbids redistributing its rows (the dated DHIS2 LGA series) may
leave the pipeline only as summary statistics. A series divided by its mean, drawn as an SVG
line or averaged into a 12-month profile is still the rows, so the audit compares shapes, not
values: every numeric run of `MIN_LENGTH` or more values in any file of a release is correlated
with the restricted references over the same months, and |r| above `THRESHOLD` is a finding.
Correlation is blind to any rescaling or offset, and its sign to an inverted axis (SVG y grows
downwards).

Runs: JSON lists, each key down a list of objects, an object's numbered keys (`m01`…`m12`);
CSV and Parquet columns (per area and month where the table has them) and numbered columns
along a row; SVG path and polyline coordinates, attribute sequences and numeric labels; HTML
table rows and columns. GeoJSON coordinates are positions, not series, and are left out.

References: each recorded LGA and state monthly series of the dated file (48 months, 2020-01 to
2023-12), its calendar-month profiles (raw mean, and mean of each year over its mean) and each
year's 12 months, and the profiles exactly as the pipeline computes them; and the NDHS 2018 microscopy positivity and children tested per LGA (its
SOURCES.md: never publish them as LGA estimates), which are cross-sections only. "The same months": a run whose months are known (records or rows with `period`, or
`month` 1–12) is compared on exactly those months; a run whose months are unknown (a drawn
line, a bare list) is compared, as 12 values, with the 12-month references and, when longer,
at every alignment with the 48-month series. A run that belongs to a named area (inside a
record with `lga_code` / `state_code`, or a line drawn under a figure title naming the area) is
compared with that area's references (an LGA's own
and its state's); a run of no named area with all of them; a cross-section (one value per LGA)
with every month and calendar month of the series across the same LGAs.
Unknown-area comparisons are batched into one matrix product per window length (numpy).
A run known to be a calendar-month index or profile (a 12-value list under `seasonal_index`,
`profile`, `recorded`, `published`, `out_of_sample` and the like, a table of `month` 1-12, a line of
12 points in a season figure) is January to December of no year: it is compared with calendar-month
profiles only, never with one year of the series. A national record is the nation's: it is compared
with the states' series, not with any one LGA's (as a state's run is not compared with its LGAs').

Seasons fitted without their state: a good model's smooth 12-month season correlates above the
threshold with the recorded profile by its merit, so the correlation alone cannot tell it from a
leak. Where the release declares a season fitted without its state's own series
(`fitted_without_own_series` in the transmission documents), the audit refits that state's season
without any of the state's series (`held_out_seasons`) and checks the published index is exactly
that fit; a run that is that proven season (|r| >= INDEPENDENT_R) is then reported as independent
of that state's rows, not as a finding. A declaration that is not the held-out fit is a finding.
"""

from __future__ import annotations

import csv
import functools
import gzip
import io
import itertools
import re
import zipfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl

MIN_LENGTH = 12
THRESHOLD = 0.97
SERIES_LENGTH = 48  # 2020-01 .. 2023-12
FIRST_YEAR = 2020
BATCH = 200_000  # windows per matrix product
ACROSS_CACHE = 32  # sets of areas whose normalised cross-sections are kept (each up to 774 x 216 values)
# the dated LGA series and its state sums: no licence stated, "never redistribute the rows"
RESTRICTED_DIR = "malaria/dhis2_lga_monthly_2020_2023"
# every state file of the folder is read (pipeline.sources.dated_cases.dated_files), not a fixed name
LGA_FILE = RESTRICTED_DIR
ADMIN_LGAS = "admin/lgas.csv"  # eHA code -> OCHA p-code, the release's lga_code
# NDHS 2018 microscopy per LGA (1-108 children each): "do not publish them as LGA estimates"
LGA_MICROSCOPY = "malaria/hbhi_lga_pfpr_2018/lga_2018_microscopy_with_state.csv"
HBHI_CROSSWALK = "climate/idm_lga_temperature_2001_2016/hbhi_lga_to_eha_lga_code_crosswalk.csv"
LGA_MEASURES = ("confirmed_uncomplicated", "malaria_cases_total", "test_positivity_pct")
STATE_MEASURES = ("confirmed_uncomplicated", "malaria_cases_total", "median_lga_tpr_pct")
SKIP_SUFFIXES = (".js", ".css", ".png", ".txt", ".ico", ".woff", ".woff2", ".md")
SKIP_KEYS = frozenset({"coordinates", "bbox"})
# record keys that describe the release's own files, not data: a list of file sizes in bytes dominated by
# one large table correlates with any series that peaks at the same place (a chance match, not a leak)
FILE_KEYS = frozenset({"bytes"})
AREA_KEYS = ("lga_code", "state_code")
NUMERIC_CELL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")  # what polars reads as a number
NATION = "NG"  # a national record (`national` in JSON, a table row of area_type national) is the nation's
SEASON_FIGURE_PREFIX = "season_"  # docs/figures/season_*.svg draw calendar-month seasons


@dataclass(frozen=True)
class References:
    """Restricted shapes: row i of `series` (48 months) belongs to `areas[i]` (its own code and
    its state's); `profiles` (12 values) are every series' profiles and years, `profile_of[j]`
    the series row profile j comes from."""

    series: np.ndarray  # (k, 48) float64
    names: tuple[str, ...]
    areas: tuple[tuple[str, str], ...]  # (code, state code); a state's series has (code, code)
    profiles: np.ndarray  # (m, 12)
    profile_names: tuple[str, ...]
    profile_of: np.ndarray  # (m,) int
    # further restricted cross-sections: name -> {lga_code: value} (one value per LGA, e.g. LGA microscopy)
    lga_values: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    # how figures title an area ("kebbi", "abak (ak)") -> its code: a drawn line under such a title
    # belongs to that area
    area_names: Mapping[str, str] = field(default_factory=dict)

    def all_cross_sections(self) -> list[tuple[dict[str, int], np.ndarray, list[str]]]:
        """The dated series' cross-sections, then each further LGA cross-section on its own LGAs."""
        out = [self.cross_sections()]
        for name, values in self.lga_values.items():
            codes = sorted(values)
            out.append(({c: i for i, c in enumerate(codes)}, np.array([[values[c]] for c in codes]), [name]))
        return out

    def cross_sections(self) -> tuple[dict[str, int], np.ndarray, list[str]]:
        """Per LGA (row), every month and profile value of every measure (columns): what a table
        of one value per LGA would hold if it carried one month or one calendar month of the series."""
        lgas = [i for i, (code, st) in enumerate(self.areas) if code != st]
        measures = sorted({self.names[i].rsplit(" ", 1)[1] for i in lgas})
        codes = sorted({self.areas[i][0] for i in lgas})
        row = {c: k for k, c in enumerate(codes)}
        blocks, names = [], []
        profiles = {int(j): self.profiles[j] for j in range(len(self.profiles))}
        for m in measures:
            mine = [i for i in lgas if self.names[i].endswith(" " + m)]
            if {self.areas[i][0] for i in mine} != set(codes):
                continue
            order = sorted(mine, key=lambda i: row[self.areas[i][0]])
            blocks.append(self.series[order])
            names += [f"{m} of every LGA in {FIRST_YEAR + k // 12}-{k % 12 + 1:02d}" for k in range(SERIES_LENGTH)]
            for kind in (0, 1):  # the two calendar-month profiles
                js = [kind * len(self.series) + i for i in order]
                blocks.append(np.vstack([profiles[j] for j in js]))
                names += [f"{m} profile{' (year/year mean)' if kind else ''} of every LGA, month {k + 1}"
                          for k in range(12)]
        matrix = np.hstack(blocks) if blocks else np.zeros((len(codes), 0))
        return row, matrix, names

    def for_area(self, area: str) -> np.ndarray:
        """Series rows compared with a run of `area`: its own, and an LGA's state's; the nation has no
        series of its own and is compared with every state's (the coarsest grain of the restricted file)."""
        if area == NATION:
            return np.array([i for i, (code, st) in enumerate(self.areas) if code == st], dtype=np.int64)
        state = {code: st for code, st in self.areas}.get(area)
        return np.array([i for i, (code, _) in enumerate(self.areas) if code in (area, state)], dtype=np.int64)


@dataclass(frozen=True)
class Finding:
    file: str  # release-relative path (`x.zip!member` inside a zip)
    where: str  # which run in the file (column, key path, attribute)
    reference: str  # the restricted series or profile it matches
    correlation: float
    length: int  # values compared


@dataclass(frozen=True)
class Run:
    where: str
    values: np.ndarray
    area: str | None = None  # lga_code or state_code the run belongs to
    months: np.ndarray | None = None  # month index from 2020-01 of each value, when known
    calendar: bool = False  # values are January to December in order
    keys: tuple[str, ...] | None = None  # one area code per value: a cross-section across areas


def _fill(values: np.ndarray) -> np.ndarray:
    """Gaps (2 in 5,808 LGA-months) filled by linear interpolation, so every window is comparable."""
    out = values.astype(np.float64).copy()
    bad = ~np.isfinite(out)
    if bad.any() and (~bad).sum() >= 2:
        idx = np.arange(out.size)
        out[bad] = np.interp(idx[bad], idx[~bad], out[~bad])
    return out


def references_from_tables(lga: pl.DataFrame | None, state: pl.DataFrame | None,
                           pcodes: Mapping[str, str] | None = None) -> References:
    """The references from the dated LGA table and its state sums (either may be None); `pcodes`
    maps the file's eHA LGA codes to the release's `lga_code`."""
    series: list[np.ndarray] = []
    names: list[str] = []
    areas: list[tuple[str, str]] = []
    for table, key, measures in ((lga, "lga_code", LGA_MEASURES), (state, "state_code", STATE_MEASURES)):
        if table is None:
            continue
        t = table.with_columns(pl.col("year").cast(pl.Int64), pl.col("month").cast(pl.Int64))
        present = [m for m in measures if m in t.columns]
        t = t.with_columns([pl.col(m).cast(pl.Float64, strict=False) for m in present]).sort(key, "year", "month")
        for (code,), g in t.group_by([key], maintain_order=True):
            own = (pcodes or {}).get(str(code), str(code)) if key == "lga_code" else str(code)
            st = str(g["state_code"][0])
            for m in present:
                v = g[m].to_numpy()
                if v.size == SERIES_LENGTH and np.isfinite(v).sum() >= SERIES_LENGTH - 4:
                    series.append(_fill(v))
                    names.append(f"{key} {own} {m}")
                    areas.append((own, st))
    s = np.vstack(series) if series else np.zeros((0, SERIES_LENGTH))
    years = s.reshape(len(s), SERIES_LENGTH // 12, 12)
    mean = years.mean(axis=2, keepdims=True)
    over_mean = years / np.where(mean == 0, 1, mean)
    blocks = [years.mean(axis=1), over_mean.mean(axis=1)] + [years[:, y] for y in range(years.shape[1])]
    labels = ["calendar-month profile", "calendar-month profile of year/year mean"] + [
        f"months of {FIRST_YEAR + y}" for y in range(years.shape[1])]
    return References(
        s, tuple(names), tuple(areas),
        np.vstack(blocks) if series else np.zeros((0, 12)),
        tuple(f"{n} {label}" for label in labels for n in names),
        np.tile(np.arange(len(s)), len(blocks)),
    )


def cleaned_profiles(data_dir: Path, pcodes: Mapping[str, str]) -> tuple[np.ndarray, list[str]]:
    """The recorded profiles exactly as the pipeline computes them (flagged and zero months left
    out, each month over its LGA-year mean; a state's case-weighted over its LGAs), by area code."""
    from pipeline.model.season_cv import dated_profiles
    from pipeline.sources.dated_cases import read_dated_lga_cases

    dated = read_dated_lga_cases(data_dir)
    if dated is None:
        return np.zeros((0, 12)), []
    dated = dated.with_columns(pl.col("lga_code").replace(dict(pcodes)))
    dp = dated_profiles(dated)
    return np.vstack([dp.lga, dp.state]), [*dp.lga_codes, *dp.state_codes]


def with_profiles(refs: References, profiles: np.ndarray, codes: list[str]) -> References:
    """`refs` with further 12-month profiles, each of an area that has a series in `refs`."""
    row: dict[str, int] = {}
    for i, (code, _) in enumerate(refs.areas):
        row.setdefault(code, i)
    keep = [k for k, c in enumerate(codes) if c in row]
    if not keep:
        return refs
    return References(
        refs.series, refs.names, refs.areas,
        np.vstack([refs.profiles, profiles[keep]]),
        (*refs.profile_names, *(f"{'lga_code' if codes[k] != refs.areas[row[codes[k]]][1] else 'state_code'} "
                                f"{codes[k]} recorded profile as the pipeline computes it" for k in keep)),
        np.concatenate([refs.profile_of, [row[codes[k]] for k in keep]]),
        refs.lga_values, refs.area_names,
    )


def restricted_references(data_dir: Path) -> References:
    """References from the data directory; an absent restricted file contributes nothing."""
    def read(rel: str) -> pl.DataFrame | None:
        path = Path(data_dir) / rel
        return pl.read_csv(path, infer_schema_length=0) if path.is_file() else None

    admin = read(ADMIN_LGAS)
    pcodes = dict(zip(admin["lga_code"], admin["ocha_adm2_pcode"], strict=True)) if admin is not None else {}
    from pipeline.sources.dated_cases import LGA_PATTERN, STATE_PATTERN, read_raw_dated

    refs = with_profiles(references_from_tables(read_raw_dated(data_dir, LGA_PATTERN),
                                                read_raw_dated(data_dir, STATE_PATTERN), pcodes),
                         *cleaned_profiles(Path(data_dir), pcodes))
    if admin is not None:
        names = {n.lower(): c for n, c in zip(admin["state_name"], admin["state_code"], strict=True)}
        for col in ("lga_name", "ocha_adm2_name"):
            names |= {f"{n} ({st})".lower(): pcodes.get(code, code)
                      for n, st, code in zip(admin[col], admin["state_code"], admin["lga_code"], strict=True)}
        refs = replace(refs, area_names=names)
    micro, crosswalk = read(LGA_MICROSCOPY), read(HBHI_CROSSWALK)
    if micro is None or crosswalk is None:
        return refs
    joined = micro.join(crosswalk, left_on=["LGA", "State"], right_on=["hbhi_lga", "hbhi_state"], how="inner")
    values = {name: {pcodes.get(code, code): float(v) for code, v in zip(joined["lga_code"], joined[col], strict=True)
                     if v not in (None, "")}
              for name, col in (("NDHS 2018 microscopy positivity per LGA (HBHI)", "p_test"),
                                ("NDHS 2018 children tested per LGA (HBHI)", "n"))}
    return replace(refs, lga_values=values)


# --- numeric runs of a file ------------------------------------------------------------------------------

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
PERIOD = re.compile(r"^(\d{4})-(\d{2})$")
DIGITS = re.compile(r"\d+")
SVG_ATTR = re.compile(r'([a-zA-Z_:][-a-zA-Z0-9_:.]*)="([^"]*)"')
SVG_ELEMENT_TEXT = re.compile(r"<([a-zA-Z][a-zA-Z0-9]*)\b([^>]*)>([^<]*)")
TABLE = re.compile(r"<table\b.*?</table>", re.S | re.I)
ROW = re.compile(r"<tr\b.*?</tr>", re.S | re.I)
CELL = re.compile(r"<t[dh]\b[^>]*>(.*?)</t[dh]>", re.S | re.I)
ROW_CODE = re.compile(r"<tr\b[^>]*\bdata-code=\"([A-Za-z0-9]+)\"", re.I)  # a row that names its area
TAG = re.compile(r"<[^>]+>")
TEXT = re.compile(r"<text\b[^>]*>([^<]*)</text>", re.I)
POINT_ATTRS = ("d", "points")
SEQUENCE_ATTRS = ("x", "y", "cx", "cy", "x1", "y1", "x2", "y2", "width", "height", "r")


def _number(x: Any) -> float:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else np.nan


_PLAIN_NUMBERS = frozenset({int, float})
# exact types `_number` maps to NaN (a bool is not a number); with `_PLAIN_NUMBERS`, every type a JSON parser returns
_NOT_NUMBERS = frozenset({str, bool, type(None), dict, list})
# exact types that are neither a dict nor a list: a container holding only these holds nothing to descend into
_LEAVES = frozenset({str, int, float, bool, type(None)})


def _numbers(values: Sequence[Any], types: set[type] | None = None) -> np.ndarray:
    """`_number` of each value, in one conversion when every value is a plain int or float
    (`types`: the set of the values' exact types, when the caller has it)."""
    if (set(map(type, values)) if types is None else types) <= _PLAIN_NUMBERS:
        return np.array(values, dtype=np.float64)
    return np.array([_number(x) for x in values], dtype=np.float64)


def _has_number(values: Sequence[Any], types: set[type]) -> bool:
    """Whether `_number` of some value is a number, from the set of exact types alone when it can tell
    (a whole list is then judged in C, not value by value): a value of no known type is looked at."""
    if types & _PLAIN_NUMBERS:
        return True
    if types <= _NOT_NUMBERS:
        return False
    return any(isinstance(x, int | float) and not isinstance(x, bool) for x in values)


@functools.lru_cache(maxsize=8192)
def _month_of(period: str) -> float:
    m = PERIOD.match(period)
    return (int(m.group(1)) - FIRST_YEAR) * 12 + int(m.group(2)) - 1 if m else np.nan


def _month_index(period: Any) -> float:
    return _month_of(period) if isinstance(period, str) else np.nan


def _runs(where: str, v: np.ndarray, area: str | None = None, months: np.ndarray | None = None,
          calendar: bool = False) -> Iterator[Run]:
    """The finite stretches of `v` at least MIN_LENGTH long."""
    v = np.asarray(v, dtype=np.float64)
    if v.size < MIN_LENGTH:
        return
    ok = np.isfinite(v)
    if ok.all():
        yield Run(where, v, area, months, calendar)
        return
    if months is not None:  # months known: the gaps are simply months not compared
        if ok.sum() >= MIN_LENGTH:
            yield Run(where, v[ok], area, months[ok], False)
        return
    edges = np.flatnonzero(np.diff(np.concatenate(([0], ok.astype(np.int8), [0]))))
    for start, stop in zip(edges[::2], edges[1::2], strict=True):
        if stop - start >= MIN_LENGTH:
            yield Run(f"{where}[{start}:{stop}]", v[start:stop], area)


def _keyed(where: str, v: np.ndarray, codes: list[str], named: np.ndarray) -> Iterator[Run]:
    """A cross-section: one value per named area (compared area by area, never as a sequence); `named`
    says which `codes` are an area (not empty), the same for every column of a table."""
    ok = np.isfinite(v) & named
    if ok.sum() >= MIN_LENGTH:
        yield Run(where, v[ok], keys=tuple(itertools.compress(codes, ok.tolist())))


def _numbered_groups(names: Iterable[str]) -> list[list[str]]:
    """Keys that differ only in their digits (`m01`…`m12`, `rain_1`…): one series along a row."""
    groups: dict[str, list[str]] = {}
    for n in names:
        if DIGITS.search(n):
            groups.setdefault(DIGITS.sub("#", n), []).append(n)
    return [g for g in groups.values() if len(g) >= MIN_LENGTH]


@functools.lru_cache(maxsize=4096)
def _may_have_groups(keys: tuple[Any, ...]) -> bool:
    """Whether some `MIN_LENGTH` of these keys differ only in their digits: an object's numbered
    keys can make a run only then, and the records of a list mostly share one set of keys (cached)."""
    if not all(isinstance(k, str) for k in keys):
        return True  # left to `_numbered_groups`
    counts: dict[str, int] = {}
    for k in keys:
        if DIGITS.search(k):
            pattern = DIGITS.sub("#", k)
            counts[pattern] = counts.get(pattern, 0) + 1
    return any(n >= MIN_LENGTH for n in counts.values())


# keys whose 12-value lists are calendar-month profiles (January to December), never a dated year
CALENDAR_KEYS = frozenset({"seasonal_index", "profile", "recorded", "published", "out_of_sample", "low", "high"})


def is_calendar_key(key: str) -> bool:
    return key in CALENDAR_KEYS or key.endswith(("_profile", "_out_of_sample", "_index"))


def json_runs(doc: Any, where: str = "$", area: str | None = None) -> list[Run]:
    """Every run of a JSON document (see the module's docstring), in document order."""
    out: list[Run] = []
    _json_into(doc, where, area, out)
    return out


def _area_of(d: Mapping[str, Any], default: str | None) -> str | None:
    """The object's own area (its `lga_code`, else its `state_code`, when a string), else `default`."""
    code = d.get("lga_code")
    if isinstance(code, str):
        return code
    code = d.get("state_code")
    return code if isinstance(code, str) else default


def _inert(d: dict[str, Any]) -> bool:
    """Whether no run can come out of the object: too few numbered keys, no list or object inside (most
    records of a list of records)."""
    return (len(d) < MIN_LENGTH or not _may_have_groups(tuple(d))) and set(map(type, d.values())) <= _LEAVES


def _json_into(doc: Any, where: str, area: str | None, out: list[Run]) -> None:
    """`json_runs` appending to one list: a release holds half a million JSON objects, and a chain of
    nested generators costs more per object than the object itself. Whole lists are typed at once
    (the set of their values' types); values are looked at one by one only where a run can come out."""
    if isinstance(doc, dict):
        if _inert(doc):
            return
        area = _area_of(doc, area)
        if len(doc) >= MIN_LENGTH and _may_have_groups(tuple(doc)):
            for group in _numbered_groups(k for k, v in doc.items() if isinstance(v, int | float)):
                out.extend(_runs(f"{where}.{{{group[0]}…}}", np.array([_number(doc[k]) for k in group]), area))
        for k, v in doc.items():
            if isinstance(v, dict | list) and k not in SKIP_KEYS:
                _json_into(v, f"{where}.{k}", NATION if k == "national" else area, out)
    elif isinstance(doc, list):
        types = set(map(type, doc))
        if len(doc) >= MIN_LENGTH:
            head = doc[:64]
            if _has_number(head, types if len(doc) <= 64 else set(map(type, head))):
                calendar_list = len(doc) == 12 and is_calendar_key(where.rsplit(".", 1)[-1])
                out.extend(_runs(where, _numbers(doc, types), area, calendar=calendar_list))
            plain = types == {dict}
            records = doc if plain else [r for r in doc if isinstance(r, dict)]
            if len(records) >= MIN_LENGTH:
                columns, shared = _record_columns(doc, records, plain)
                _records_into(doc, columns, where, area, out)
                if shared and _inert_columns(columns):
                    return  # every item an inert object (`_inert`), told once for all
        if not types <= _LEAVES:
            for i, v in enumerate(doc):
                if isinstance(v, dict | list):
                    _json_into(v, f"{where}[{i}]", area, out)


def _inert_columns(columns: dict[str, Sequence[Any]]) -> bool:
    """`_inert` of every object of a list whose objects share their keys (`columns`), told from the keys
    once and from the set of types of each column."""
    return (len(columns) < MIN_LENGTH or not _may_have_groups(tuple(columns))) and \
        all(set(map(type, c)) <= _LEAVES for c in columns.values())


def _record_columns(doc: list[Any], records: list[dict[str, Any]], plain: bool
                   ) -> tuple[dict[str, Sequence[Any]], bool]:
    """(each key of the objects (`records`, the objects among the items of `doc`), in order of first
    appearance -> its value in each item (None where the item is no object or lacks the key), whether
    every item is a plain dict with the same keys in the same order). The latter, a table written as
    JSON, is one transposition of their values."""
    if plain and len(set(map(tuple, records))) == 1:
        return dict(zip(records[0], zip(*map(dict.values, records), strict=True), strict=True)), True
    keys = dict.fromkeys(itertools.chain.from_iterable(records))
    return {k: [r.get(k) if isinstance(r, dict) else None for r in doc] for k in keys}, False


def _records_into(doc: list[Any], columns: dict[str, Sequence[Any]], where: str, area: str | None,
                  out: list[Run]) -> None:
    """Each key down a list of objects (`columns`, see `_record_columns`): on their months when they
    have `period`, across areas when each names its own, top to bottom otherwise. A key that holds
    no number in any object makes no run (every value NaN) and is passed over."""
    absent = [None] * len(doc)
    months = np.array(list(map(_month_index, columns["period"]))) if "period" in columns else np.full(len(doc), np.nan)
    has_months = bool(np.isfinite(months).any())
    calendar = len(doc) == 12 and list(columns.get("month", absent)) == list(range(1, 13))
    own: list[str] = []
    keyed = False
    if not has_months:
        own = [lga if isinstance(lga, str) else st if isinstance(st, str) else ""
               for lga, st in zip(columns.get("lga_code", absent), columns.get("state_code", absent), strict=True)]
        keyed = all(own) and len(set(own)) == len(own)
    named = np.ones(len(own), dtype=bool)  # keyed: every item names its area
    ok = np.isfinite(months)
    for key, column in columns.items():
        if key in FILE_KEYS:
            continue
        types = set(map(type, column))
        if not _has_number(column, types):
            continue
        vals = _numbers(column, types)
        if has_months:
            out.extend(_runs(f"{where}[].{key}", vals[ok], area, months[ok]))
        elif keyed:
            out.extend(_keyed(f"{where}[].{key}", vals, own, named))
        else:
            out.extend(_runs(f"{where}[].{key}", vals, area, calendar=calendar))


TEXT_COLUMNS = (*AREA_KEYS, "period", "area_type")  # the only text columns the audit reads
# a character no number has: a cell holding one is text, whatever float() would make of it (" 1", "inf", "1_0")
NOT_NUMERIC_CHAR = re.compile(r"[^\deE+\-.]")


def _numeric_column(cells: Sequence[str]) -> np.ndarray | None:
    """The column's values when it has a value and every non-empty cell is a number (`NUMERIC_CELL`), empty
    cells NaN; else None. The rule is tried cell by cell only in C: a cell made only of digits, signs,
    points and exponents that float() reads is exactly a `NUMERIC_CELL` (float() refuses "1e", "2021-03",
    "1.2.3"), and a text column is told by its first value."""
    first = next(filter(None, cells), None)
    if first is None or not NUMERIC_CELL.fullmatch(first) or NOT_NUMERIC_CHAR.search("".join(cells)):
        return None
    try:
        return np.array([v or "nan" for v in cells] if "" in cells else cells, dtype=np.float64)
    except ValueError:
        return None


def _split_csv(text: str) -> tuple[list[str], Sequence[Sequence[str]], int] | None:
    """(header, body columns, body rows) of a CSV text that needs no csv parser, else None (the csv module
    reads it). Without a quote, a carriage return or a NUL, and with no blank line, no ragged row and no
    line longer than the csv module's field limit, the csv module reads exactly the lines split at
    commas; every cell is then cut from one split of the whole text, each column one slice of it."""
    if '"' in text or "\r" in text or "\0" in text:
        return None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the last line's end
    if not lines or "" in lines or max(map(len, lines)) > csv.field_size_limit():
        return None
    commas = lines[0].count(",")
    if set(map(str.count, lines, itertools.repeat(","))) != {commas}:
        return None
    width = commas + 1
    cells = ",".join(lines).split(",")
    return cells[:width], [cells[width + j::width] for j in range(width)], len(lines) - 1


@dataclass(frozen=True)
class Table:
    """A table's columns as the audit reads them: numeric columns as float arrays (null -> NaN), the
    others as lists of strings (null -> None). Cheaper to make than a DataFrame for the thousands of
    small CSV files of a release, and grouped with a dict of row indices rather than a group-by."""

    columns: list[str]
    num: dict[str, np.ndarray]
    text: dict[str, list[str | None]]
    height: int

    @classmethod
    def of_frame(cls, df: pl.DataFrame) -> Table:
        num = {c: df[c].cast(pl.Float64).to_numpy() for c, t in df.schema.items() if t.is_numeric()}
        text = {c: df[c].cast(pl.Utf8).to_list() for c in TEXT_COLUMNS if c in df.columns and c not in num}
        return cls(list(df.columns), num, text, df.height)

    @classmethod
    def of_csv(cls, data: bytes) -> Table:
        """A column is numeric when it has a value and every value parses as a number (as polars infers).
        Only the text columns the audit reads are kept (`TEXT_COLUMNS`)."""
        text = data.decode("utf-8", "replace")
        split = _split_csv(text)
        columns: Sequence[Sequence[str]]
        if split is not None:
            header, columns, height = split
        else:
            rows = list(csv.reader(io.StringIO(text)))
            if not rows:
                return cls([], {}, {}, 0)
            header, body = rows[0], rows[1:]
            width = len(header)
            columns = list(zip(*body, strict=True)) if body and set(map(len, body)) == {width} else \
                [tuple(r[j] if j < len(r) else "" for r in body) for j in range(width)]
            columns, height = columns or [()] * width, len(body)
        num: dict[str, np.ndarray] = {}
        text_columns: dict[str, list[str | None]] = {}
        for name, vals in zip(header, columns, strict=True):
            values = _numeric_column(vals)
            if values is not None:
                num[name] = values
            elif name in TEXT_COLUMNS:
                text_columns[name] = [v or None for v in vals]
        return cls(header, num, text_columns, height)

    def strings(self, col: str) -> list[str | None]:
        if col in self.text:
            return self.text[col]
        return [None if not np.isfinite(x) else str(int(x)) if float(x).is_integer() else str(x)
                for x in self.num[col]]


def table_runs(df: pl.DataFrame | Table) -> Iterator[Run]:
    """Numeric columns (per area and on their months when the table has `period` or `month`, top
    to bottom otherwise) and numbered columns along each row."""
    t = df if isinstance(df, Table) else Table.of_frame(df)
    numeric = [c for c in t.columns if c in t.num and c not in ("month", "year")]
    area_col = next((k for k in AREA_KEYS if k in t.columns), None)
    time_col = "period" if "period" in t.columns else "month" if "month" in t.columns else None
    codes = t.strings(area_col) if area_col else [None] * t.height
    if area_col and time_col:
        groups: dict[str | None, list[int]] = {}
        if max(Counter(codes).values(), default=0) >= MIN_LENGTH:  # else no area has a run (one value per row)
            for i, code in enumerate(codes):  # by area, in order of first appearance, rows in table order
                groups.setdefault(code, []).append(i)
        kinds = t.text.get("area_type")
        periods = t.text.get("period") if time_col == "period" else None
        for code, rows in groups.items():
            if len(rows) < MIN_LENGTH:
                continue  # every run of the area has at most one value per row: too short to compare
            idx = np.asarray(rows, dtype=np.int64)
            national = code is None and kinds is not None and all(kinds[i] == "national" for i in rows
                                                                  if kinds[i] is not None)
            area = NATION if national else code
            if time_col == "period":
                months = np.array([_month_index(periods[i]) for i in rows] if periods else [np.nan] * len(rows))
                ok = np.isfinite(months)
                for c in numeric:
                    yield from _runs(f"{area_col}={area} column {c}", t.num[c][idx][ok], str(area), months[ok])
            else:
                calendar = "month" in t.num and np.array_equal(t.num["month"][idx], np.arange(1, 13))
                for c in numeric:
                    yield from _runs(f"{area_col}={area} column {c}", t.num[c][idx], str(area), calendar=calendar)
    elif area_col:
        keys = ["" if c is None else c for c in codes]
        named = np.fromiter(map(bool, keys), dtype=bool, count=len(keys))
        for c in numeric:
            yield from _keyed(f"column {c}", t.num[c], keys, named)
    else:
        for c in numeric:
            yield from _runs(f"column {c}", t.num[c])
    for group in _numbered_groups(c for c in numeric):
        rows_of = np.column_stack([t.num[c] for c in group]) if t.height else np.empty((0, len(group)))
        for i, row in enumerate(rows_of):
            yield from _runs(f"row {i} {group[0]}…", row, codes[i])


def svg_runs(text: str, where: str = "", names: Mapping[str, str] | None = None,
             calendar: bool = False) -> Iterator[Run]:
    """Path and polyline coordinates (x and y apart), attribute sequences across elements in
    document order (every `cy`, every bar `height`), and numeric <text> labels in order. A line
    drawn after a <text> title that names an area (`names`) belongs to that area. In a season
    figure (`calendar`) a drawn line of 12 points is a calendar-month profile."""
    sequences: dict[str, list[float]] = {a: [] for a in SEQUENCE_ATTRS}
    area: str | None = None
    for n, m in enumerate(SVG_ELEMENT_TEXT.finditer(text)):
        tag, attrs, content = m.group(1), m.group(2), m.group(3)
        if tag == "text" and names and len(re.findall(r"[^\W\d_]", content)) >= 3:  # a title, not a tick
            area = names.get(content.strip().lower())
        for name, value in SVG_ATTR.findall(attrs):
            if name in POINT_ATTRS:
                nums = np.array([float(x) for x in NUMBER.findall(value)], dtype=np.float64)
                label = f"{where}<{tag} #{n}> {name}" + (f" (under the title of {area})" if area else "")
                cal = calendar and len(nums) == 24
                yield from _runs(f"{label} x", nums[0::2], area, calendar=cal)
                yield from _runs(f"{label} y", nums[1::2], area, calendar=cal)
            elif name in sequences and NUMBER.fullmatch(value.strip()):
                sequences[name].append(float(value))
    for name, values in sequences.items():
        yield from _runs(f"{where}every {name}=", np.array(values))
    labels = [float(t) for t in (s.strip() for s in TEXT.findall(text)) if NUMBER.fullmatch(t)]
    yield from _runs(f"{where}<text> labels", np.array(labels))


def _cell_number(cell: str) -> float:
    text = TAG.sub("", cell).replace(",", "").replace("%", "").replace("−", "-").strip()
    return float(text) if NUMBER.fullmatch(text) else np.nan


def html_runs(text: str, names: Mapping[str, str] | None = None) -> Iterator[Run]:
    """Table rows and columns (numeric cells), and any inline SVG. A table whose rows each name a
    different area (`<tr data-code="NG020001">`, as the map's printed tables do) holds a cross-section
    in each column, compared area by area as a CSV table's column with an area column is; a table whose
    rows repeat an area (one area's months) stays a sequence."""
    for t, table in enumerate(TABLE.findall(text)):
        found = ROW.findall(table)
        rows = [[_cell_number(c) for c in CELL.findall(r)] for r in found]
        codes = [(m.group(1) if (m := ROW_CODE.match(r)) else "") for r in found]
        named = np.array([bool(c) for c in codes], dtype=bool)
        keyed = named.any() and len({c for c in codes if c}) == int(named.sum())
        for i, row in enumerate(rows):
            yield from _runs(f"table {t} row {i}", np.array(row))
        for j in range(max((len(r) for r in rows), default=0)):
            column = np.array([r[j] if j < len(r) else np.nan for r in rows])
            if keyed:
                yield from _keyed(f"table {t} column {j}", column, codes, named)
            else:
                yield from _runs(f"table {t} column {j}", column)
    if "<svg" in text:
        yield from svg_runs(text, "inline svg ", names)


def file_runs(name: str, data: bytes, names: Mapping[str, str] | None = None) -> Iterator[tuple[str, Run]]:
    """(file, run) for every numeric run in one file; gzip and zip are opened. `names` lets a
    figure's titles say which area a drawn line belongs to."""
    if name.endswith(".gz"):
        yield from file_runs(name[:-3], gzip.decompress(data), names)
        return
    if name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for member in z.namelist():
                yield from file_runs(f"{name}!{member}", z.read(member), names)
        return
    runs: Iterable[Run] = ()
    if name.endswith(SKIP_SUFFIXES):
        return
    if name.endswith((".json", ".geojson")):
        try:
            runs = json_runs(orjson.loads(data))
        except orjson.JSONDecodeError:
            runs = ()
    elif name.endswith(".csv"):
        try:
            runs = table_runs(Table.of_csv(data))
        except (csv.Error, ValueError):
            runs = ()
    elif name.endswith(".parquet"):
        runs = table_runs(pl.read_parquet(io.BytesIO(data)))
    elif name.endswith(".svg"):
        runs = svg_runs(data.decode("utf-8", "replace"), names=names,
                        calendar=name.rsplit("/", 1)[-1].startswith(SEASON_FIGURE_PREFIX))
    elif name.endswith((".html", ".htm")):
        runs = html_runs(data.decode("utf-8", "replace"), names)
    for run in runs:
        yield name, run


def release_files(root: Path) -> Iterator[tuple[str, bytes]]:
    """Every file of a release directory (a `.gz` beside its identity file holds the same bytes)."""
    for path in sorted((p for p in Path(root).rglob("*") if p.is_file()), key=lambda p: p.parts):  # as Paths sort
        if path.suffix == ".gz" and path.with_suffix("").is_file():
            continue
        yield str(path.relative_to(root)), path.read_bytes()


# --- comparison ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _ramp(length: int) -> np.ndarray:
    """An evenly spaced ramp of `length` values, centred and of unit length."""
    ramp = np.arange(length, dtype=np.float64)
    ramp = (ramp - ramp.mean()) / np.linalg.norm(ramp - ramp.mean())
    ramp.flags.writeable = False
    return ramp


def _normalise(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows centred and scaled to unit length, and which rows carry a shape: constant rows and
    evenly spaced ramps (axis positions, x coordinates, month numbers) carry none. Called tens of
    thousands of times on small arrays, so the reductions are the ufuncs `mean` and `linalg.norm`
    run for float rows (the same sums, without their Python wrappers)."""
    centred = rows - np.add.reduce(rows, axis=1, keepdims=True) / rows.shape[1]
    norm = np.sqrt(np.add.reduce(centred * centred, axis=1))
    ok = norm > 1e-9 * np.maximum(np.abs(rows).max(axis=1), 1e-300)
    z = np.divide(centred, norm[:, None], out=np.zeros_like(centred), where=ok[:, None])
    return z, ok & (np.abs(z @ _ramp(rows.shape[1])) < 0.999)


def _windows(refs: References, length: int, rows: np.ndarray | None = None,
             calendar: bool = False) -> tuple[np.ndarray, list[str]]:
    """Normalised references of `length` values (the profiles for 12, every same-length window
    of the 48-month series otherwise), optionally only those of series `rows`. A calendar-month
    run (January to December of no year) is compared with calendar-month profiles only: a single
    year of the series is not over the same months."""
    if length == 12:  # a run of a named area or a calendar run: its profiles; of no area: single years too
        years = (np.arange(len(refs.profiles)) >= 2 * len(refs.series)) & (
            np.arange(len(refs.profiles)) < (2 + SERIES_LENGTH // 12) * len(refs.series))
        mine = np.ones(len(refs.profiles), dtype=bool) if rows is None else np.isin(refs.profile_of, rows)
        keep = np.arange(len(refs.profiles)) if rows is None and not calendar else np.flatnonzero(mine & ~years)
        z, ok = _normalise(refs.profiles[keep])
        return z[ok], [refs.profile_names[i] for i in keep[ok]]
    idx = np.arange(len(refs.series)) if rows is None else rows
    flat = np.lib.stride_tricks.sliding_window_view(refs.series[idx], length, axis=1).reshape(-1, length)
    names = [f"{refs.names[i]} months {o + 1}-{o + length} of 2020-01..2023-12"
             for i in idx for o in range(SERIES_LENGTH - length + 1)]
    z, ok = _normalise(flat)
    return z[ok], [n for n, k in zip(names, ok, strict=True) if k]


def _lengths(n: int) -> list[int]:
    """Window lengths a run of unknown months is compared at."""
    return [12] if n <= 13 else [min(n, SERIES_LENGTH)]


@dataclass
class _Batch:
    refs: np.ndarray
    names: list[str]
    windows: list[np.ndarray] = field(default_factory=list)
    owners: list[np.ndarray] = field(default_factory=list)
    size: int = 0


class _Matcher:
    """Best match per run id; runs of no area are batched per window length."""

    def __init__(self, refs: References, threshold: float):
        self.refs, self.threshold = refs, threshold
        # run id -> state of the matched reference ("" for a cross-section) -> best match
        self.best: dict[int, dict[str, tuple[float, str, int]]] = {}
        self.batches: dict[int, _Batch] = {}
        self.by_area: dict[str, np.ndarray] = {}
        self.cross: list[tuple[dict[str, int], np.ndarray, list[str]]] | None = None
        self.across: dict[tuple[int, tuple[str, ...]], tuple[np.ndarray, np.ndarray, np.ndarray] | None] = {}
        self.state_of = {code: st for code, st in refs.areas}

    def _keep(self, owner: int, r: float, name: str, length: int) -> None:
        """Best match per run and per state of the reference (a run may be independent of one state's
        series and not of another's)."""
        parts = name.split(" ", 2)
        state = self.state_of.get(parts[1], "") if len(parts) > 1 and parts[0] in AREA_KEYS else ""
        mine = self.best.setdefault(owner, {})
        if r > self.threshold and r > mine.get(state, (0.0, "", 0))[0]:
            mine[state] = (r, name, length)

    def add(self, owner: int, run: Run) -> None:
        if not len(self.refs.series):
            return
        if run.keys is not None:
            self._keyed(owner, run)
            return
        rows = None
        if run.area is not None:
            if run.area not in self.by_area:
                self.by_area[run.area] = self.refs.for_area(run.area)
            rows = self.by_area[run.area]
            if not rows.size:
                return  # an area without a restricted series
        if run.months is not None:
            self._aligned(owner, run, rows)
        elif run.calendar or rows is not None:
            self._direct(owner, run, rows)
        else:
            self._batched(owner, run)

    def _keyed(self, owner: int, run: Run) -> None:
        """A cross-section across areas: compared, over the LGAs both cover, with every month and
        calendar month of the series across LGAs."""
        if self.cross is None:
            self.cross = self.refs.all_cross_sections()
        assert run.keys is not None
        last: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # the LGA cross-sections mostly share their LGAs
        for k, (_, _, names) in enumerate(self.cross):
            across = self._across(k, run.keys)
            if across is None:
                continue
            pos, zr, okr = across
            if last is None or not np.array_equal(last[0], pos):
                last = (pos, *_normalise(run.values[pos][None, :]))
            _, zx, okx = last
            if not okx[0]:
                continue
            r = np.abs(zr @ zx[0]) * okr
            best = int(r.argmax())
            self._keep(owner, float(r[best]), f"{names[best]} (across the same {pos.size} LGAs)", int(pos.size))

    def _across(self, k: int, keys: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(positions of `keys` the cross-section `k` covers, its normalised references over those LGAs
        and which carry a shape), or None when they are too few. Every column of a table and every key
        of a list of records is a run over the same areas: the references are normalised once per set."""
        assert self.cross is not None
        if (k, keys) not in self.across:
            row, matrix, _ = self.cross[k]
            pos = np.array([i for i, c in enumerate(keys) if c in row], dtype=np.int64)
            if len(self.across) >= ACROSS_CACHE:
                del self.across[next(iter(self.across))]  # the oldest: the runs of one file come together
            if pos.size < MIN_LENGTH or not matrix.shape[1]:
                self.across[k, keys] = None
            else:
                self.across[k, keys] = (pos, *_normalise(matrix[[row[keys[i]] for i in pos]].T))
        return self.across[k, keys]

    def _aligned(self, owner: int, run: Run, rows: np.ndarray | None) -> None:
        """Months known: one correlation per reference series over the months both cover."""
        assert run.months is not None
        inside = (run.months >= 0) & (run.months < SERIES_LENGTH)
        if inside.sum() < MIN_LENGTH:
            return
        idx = np.arange(len(self.refs.series)) if rows is None else rows
        x = run.values[inside][None, :]
        refs = self.refs.series[idx][:, run.months[inside].astype(np.int64)]
        zx, okx = _normalise(x)
        zr, okr = _normalise(refs)
        if not okx[0]:
            return
        r = np.abs(zr @ zx[0]) * okr
        best = int(r.argmax())
        self._keep(owner, float(r[best]), f"{self.refs.names[idx[best]]} on the same months", int(inside.sum()))

    def _direct(self, owner: int, run: Run, rows: np.ndarray | None) -> None:
        """A calendar run, or a run of a named area: compared at once with its few references."""
        for length in ([12] if run.calendar else _lengths(run.values.size)):
            refs, names = _windows(self.refs, length, rows, calendar=run.calendar)
            if not len(refs):
                continue
            z, ok = _normalise(np.lib.stride_tricks.sliding_window_view(run.values, length))
            r = np.abs(z[ok] @ refs.T)
            if r.size:
                i, j = np.unravel_index(int(r.argmax()), r.shape)
                self._keep(owner, float(r[i, j]), names[j], length)

    def _batched(self, owner: int, run: Run) -> None:
        for length in _lengths(run.values.size):
            if length not in self.batches:
                self.batches[length] = _Batch(*_windows(self.refs, length))
            b = self.batches[length]
            w = np.lib.stride_tricks.sliding_window_view(run.values, length)
            b.windows.append(w)
            b.owners.append(np.full(len(w), owner, dtype=np.int64))
            b.size += len(w)
            if b.size >= BATCH:
                self.flush(length)

    def flush(self, length: int | None = None) -> None:
        for ln in [length] if length is not None else list(self.batches):
            b = self.batches[ln]
            if not b.size or not len(b.refs):
                b.windows, b.owners, b.size = [], [], 0
                continue
            z, ok = _normalise(np.concatenate(b.windows))
            owners = np.concatenate(b.owners)[ok]
            r = np.abs(z[ok].astype(np.float32) @ b.refs.T.astype(np.float32))
            best_ref = r.argmax(axis=1)
            best = r[np.arange(len(r)), best_ref]
            for i in np.flatnonzero(best > self.threshold):
                self._keep(int(owners[i]), float(best[i]), b.names[best_ref[i]], ln)
            b.windows, b.owners, b.size = [], [], 0


# --- seasons declared fitted without their state's series ---------------------------------------------

INDEPENDENT_R = 0.999  # a run this close to a proven held-out season is that season (drawn or rescaled)
INDEX_TOLERANCE = 0.0005 + 1e-9  # the published index is rounded to 3 decimals
TRANSMISSION_STATES = "v1/transmission/states.json"
TRANSMISSION_LGAS = "v1/transmission/lgas"


@dataclass(frozen=True)
class Declared:
    """A published season the release declares fitted without its state's own series."""

    file: str
    area: str  # state or LGA code
    state: str
    index: np.ndarray  # (12,) the published seasonal_index


def declarations(root: Path) -> list[Declared]:
    """Every season of the release's transmission documents carrying `fitted_without_own_series: true`."""
    root = Path(root)
    out: list[Declared] = []
    path = root / TRANSMISSION_STATES
    if path.is_file():
        doc = orjson.loads(path.read_bytes())
        for st in doc.get("states", []):
            season = st.get("season") or {}
            if season.get("fitted_without_own_series") is True:
                out.append(Declared(TRANSMISSION_STATES, st["state_code"], st["state_code"],
                                    np.asarray(season["seasonal_index"], dtype=np.float64)))
    for p in sorted((root / TRANSMISSION_LGAS).glob("*.json")):
        doc = orjson.loads(p.read_bytes())
        for lga in doc.get("lgas", []):
            if lga.get("fitted_without_own_series") is True:
                out.append(Declared(str(p.relative_to(root)), lga["lga_code"], doc["state_code"],
                                    np.asarray(lga["seasonal_index"], dtype=np.float64)))
    return out


def check_declarations(declared: Iterable[Declared], held_out: Mapping[str, np.ndarray]
                       ) -> tuple[dict[str, list[np.ndarray]], list[Finding]]:
    """(proven held-out seasons per state, false declarations). A declaration is proven when the
    published index equals, to its rounding, the season the audit obtained by fitting without the
    state (`held_out`, area code -> 12 values); one that differs is a finding of its own, and an
    area the audit has no held-out season for proves nothing."""
    proven: dict[str, list[np.ndarray]] = {}
    false: list[Finding] = []
    for d in declared:
        h = held_out.get(d.area)
        if h is None:
            continue
        h = np.asarray(h, dtype=np.float64)
        if h.shape == d.index.shape and float(np.abs(h - d.index).max()) <= INDEX_TOLERANCE:
            proven.setdefault(d.state, []).append(h)
        else:
            r = float(np.corrcoef(h, d.index)[0, 1]) if h.shape == d.index.shape else 0.0
            false.append(Finding(d.file, f"{d.area} season.fitted_without_own_series",
                                 f"declared fitted without {d.state}, but not the season fitted without it "
                                 f"(r with it {r:.4f})", round(r, 4), int(d.index.size)))
    return proven, false


def _independent(values: np.ndarray, curves: list[np.ndarray]) -> bool:
    if values.size != 12 or not curves:
        return False
    z, ok = _normalise(np.vstack([values[None, :], *[c[None, :] for c in curves]]))
    return bool(ok[0]) and bool((np.abs(z[1:][ok[1:]] @ z[0]) >= INDEPENDENT_R).any())


@dataclass(frozen=True)
class AuditResult:
    findings: list[Finding]  # restricted series in the release (and false declarations)
    independent: list[Finding]  # matches that are a proven held-out season of the matched series' state


def audit_runs_detailed(runs: Iterable[tuple[str, Run]], refs: References, threshold: float = THRESHOLD,
                        proven: Mapping[str, list[np.ndarray]] | None = None) -> AuditResult:
    """Findings for (file, run) pairs; a run seen before (same values, area and months) is compared once.
    A match with a series of state S is independent, not a finding, when the run is (|r| >=
    INDEPENDENT_R) a season the release declares fitted without S and the audit proved to be that fit."""
    matcher = _Matcher(refs, threshold)
    seen: dict[tuple[bytes, str | None, bytes | None, bool, tuple[str, ...] | None], int] = {}
    places: list[list[tuple[str, str]]] = []
    values: list[np.ndarray] = []
    for file, run in runs:
        key = (run.values.tobytes(), run.area, None if run.months is None else run.months.tobytes(), run.calendar,
               run.keys)
        if key not in seen:
            seen[key] = len(places)
            places.append([])
            values.append(run.values)
            matcher.add(seen[key], run)
        places[seen[key]].append((file, run.where))
    matcher.flush()
    found: list[Finding] = []
    independent: list[Finding] = []
    for owner, by_state in matcher.best.items():
        for state, (r, name, length) in by_state.items():
            free = bool(state) and _independent(values[owner], list((proven or {}).get(state, [])))
            for file, where in places[owner]:
                if free:
                    independent.append(Finding(file, where, f"{name}; independent (fitted without {state})",
                                               round(r, 4), length))
                else:
                    found.append(Finding(file, where, name, round(r, 4), length))
    key_of = lambda f: (f.file, f.where, f.reference)  # noqa: E731
    return AuditResult(sorted(found, key=key_of), sorted(independent, key=key_of))


def audit_runs(runs: Iterable[tuple[str, Run]], refs: References, threshold: float = THRESHOLD) -> list[Finding]:
    """Findings for (file, run) pairs, no declaration taken into account."""
    return audit_runs_detailed(runs, refs, threshold).findings


def audit(root: Path, refs: References, held_out: Mapping[str, np.ndarray] | None = None,
          threshold: float = THRESHOLD) -> AuditResult:
    """Every numeric run of every file of the release at `root` matched against `refs`; the release's
    declarations of seasons fitted without their state are checked against `held_out`."""
    proven, false = check_declarations(declarations(root), held_out or {})
    result = audit_runs_detailed((r for name, data in release_files(root) for r in file_runs(name, data, refs.area_names)),
                                 refs, threshold, proven)
    return AuditResult(sorted([*false, *result.findings], key=lambda f: (f.file, f.where, f.reference)),
                       result.independent)


def audit_release(root: Path, refs: References, threshold: float = THRESHOLD,
                  held_out: Mapping[str, np.ndarray] | None = None) -> list[Finding]:
    """The findings of `audit` (what may not be published)."""
    return audit(root, refs, held_out, threshold).findings


def held_out_seasons(data_dir: Path, geo: Any = None) -> dict[str, np.ndarray]:
    """Area code -> the season fitted without its state's series, for every state with dated series and
    its LGAs, at the published rounding: each LGA's from the whole-state fold that left its state out
    (pipeline.model.season_cv), a state's the population-weighted mean of its LGAs' as published.
    `geo`: the data directory's geography when the caller has it loaded (the season fit is memoised
    per geography, pipeline.datasets.transmission.season_model)."""
    from pipeline.datasets.transmission import INDEX_DECIMALS, season_model
    from pipeline.geography import load_geography
    from pipeline.model.season_cv import weighted_profile

    geo = geo if geo is not None else load_geography(Path(data_dir))
    sm = season_model(Path(data_dir), geo)
    # the published rule's held-out index (model 5's outer folds; model 4's before it)
    if sm.fit is None or sm.fit.dated is None or sm.rule not in sm.fit.cv.area_index:
        return {}
    held = sm.fit.cv.area_index[sm.rule]
    state = np.asarray(sm.fit.state_of_area)
    pop = sm.lga_population if sm.lga_population is not None else np.ones(len(state))
    out: dict[str, np.ndarray] = {}
    for s in sm.fit.dated.state_codes:
        rows = np.flatnonzero(state == s)
        if not rows.size or not np.isfinite(held[rows]).all():
            continue
        ix = np.round(held[rows], INDEX_DECIMALS)
        out |= {sm.lga_codes[i]: ix[k] for k, i in enumerate(rows)}
        out[s] = np.round(weighted_profile(ix, pop[rows] / pop[rows].sum()), INDEX_DECIMALS)
    return out

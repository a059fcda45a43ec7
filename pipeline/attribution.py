"""Every data source the service republishes figures from, with licence and citation.

One structured list so that every place that credits sources reads the same facts:
the site's sources page, the `source` fields of the responses and the README of the
downloadable bundles. The facts come from the SOURCES.md files next to the data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """One credited data source; the facts come from the SOURCES.md files next to the data."""

    key: str  # stable identifier, for `source` fields and tests
    name: str
    provider: str
    used_for: str
    licence: str
    via: str
    note: str = ""
    citation: str = ""  # how to cite the source, where it asks for or has a citable publication
    # what its SOURCES.md allows a release to carry: ATTRIBUTION (its values, with credit),
    # NONE_STATED (no licence: its values as credited context, no licence granted for them),
    # AGGREGATES (proportions and aggregates only) or SUMMARY_ONLY (never its rows, however
    # rescaled: summary statistics such as correlations, errors and counts only)
    terms: str = "attribution"
    spdx: str = "other-at"  # the licence's SPDX id where the source names one licence outright
    # public pages, for readers to check a source and its terms: (label, address) of the source (the
    # publisher's page where there is one, then the repository the copy came from), and the licences
    # its terms name (keys of LICENCE_PAGES; none where the source states no licence)
    pages: tuple[tuple[str, str], ...] = ()
    licences: tuple[str, ...] = ()

    def to_json(self) -> dict[str, str]:
        return {f: getattr(self, f) for f in FIELDS}

    @property
    def licence_links(self) -> list[tuple[str, str]]:
        """(licence name, address of its text) for each licence the source's terms name."""
        return [(LICENCE_PAGES[k][0], LICENCE_PAGES[k][1]) for k in self.licences]


FIELDS = ("key", "name", "provider", "used_for", "licence", "via", "note", "citation")

# The public text of each licence a source names: SPDX id (or a name where SPDX has none) -> (name, address).
LICENCE_PAGES: dict[str, tuple[str, str]] = {
    "CC-BY-4.0": ("CC BY 4.0", "https://creativecommons.org/licenses/by/4.0/"),
    "CC-BY-3.0-IGO": ("CC BY 3.0 IGO", "https://creativecommons.org/licenses/by/3.0/igo/"),
    "Apache-2.0": ("Apache-2.0", "https://www.apache.org/licenses/LICENSE-2.0"),
    "MIT": ("MIT", "https://opensource.org/license/mit"),
    "GPL-3.0": ("GPL-3.0", "https://www.gnu.org/licenses/gpl-3.0.html"),
}


def _repo(name: str) -> tuple[str, str]:
    """The public page of the repository a copy came from (as its `via` names it)."""
    return ("repository", f"https://github.com/{name}")


_HBHI = _repo("numalariamodeling/hbhi-nigeria-publication-2021")
_SOE = _repo("SoeHtutAung/MCDA-Spatial-DHS-Rshiny-Nigeria")
ATTRIBUTION, NONE_STATED, AGGREGATES, SUMMARY_ONLY = "attribution", "none-stated", "aggregates", "summary-only"

SOURCES: tuple[Source, ...] = (
    Source("boundaries", "LGA and state boundaries", "eHealth Africa / GRID3 Nigeria (eHA GeoServer layers, 2018–2019)",
           "LGA outlines, areas, representative points (/v1/boundaries/lgas, area_km2)",
           "CC BY 4.0 upstream (usual GRID3/eHA licence; not verified for this copy)",
           "repository Godskid89/nigeriadata, data/lga_admin_boundaries.rda and "
           "state_admin_boundaries.rda (commit 12c4a101)",
           "The copying repository states no licence. Credit eHealth Africa / GRID3.",
           pages=(("GRID3", "https://grid3.org/"), _repo("Godskid89/nigeriadata")),
           licences=("CC-BY-4.0",)),
    Source("ocha_codab", "Common Operational Dataset, administrative boundaries (COD-AB) gazetteer",
           "OCHA, from OSGOF (Office of the Surveyor General of the Federation), edition 2019-04-17",
           "LGA codes (OCHA p-codes) and LGA names", "CC BY-IGO (as published on HDX, cod-ab-nga)",
           "repository haasinikellampalli-wq/DATASCI-112-Final---HC (commit 35cc5f91)", spdx="CC-BY-3.0-IGO",
           pages=(("HDX: cod-ab-nga", "https://data.humdata.org/dataset/cod-ab-nga"), _repo("haasinikellampalli-wq/DATASCI-112-Final---HC")),
           licences=("CC-BY-3.0-IGO",)),
    Source("population", "Bottom-up gridded population estimates for Nigeria, version 2.0",
           "WorldPop and the National Population Commission of Nigeria (aggregated to LGA by Geopode)",
           "population per LGA and state; population density behind the derived is_urban flag",
           "CC BY 4.0 (WorldPop)", "repository Oluwatobi-abu/nigeria-lga-population-density (commit a18938c7)",
           "Modelled estimates, not census counts; the reference year is not stated in the file.", spdx="CC-BY-4.0",
           pages=(("WorldPop", "https://www.worldpop.org/"), _repo("Oluwatobi-abu/nigeria-lga-population-density")),
           licences=("CC-BY-4.0",)),
    Source("state_names", "State names, ISO codes and geopolitical zones", "ropensci/naijR package data",
           "state names and zones", "GPL-3 package; the values are public facts",
           "repository ropensci/naijR, data/states_nigeria.rda (commit 7fed3840)",
           pages=(_repo("ropensci/naijR"),),
           licences=("GPL-3.0",)),
    Source("chirps", "CHIRPS v2.0 rainfall, state means (dekadal)",
           "UCSB Climate Hazards Center, aggregated by WFP (HDX: Rainfall Indicators at Subnational Level)",
           "recorded monthly rainfall per state and its climatology",
           "CHIRPS: public domain; WFP/HDX indicators: CC BY-IGO. Credit WFP / CHIRPS (UCSB Climate Hazards "
           "Center)", "repository DavidWinrich101/virawatch, backend/data/chirps_weekly_nigeria.csv",
           "Months from about 2026-05 may be CHIRPS-preliminary.",
           pages=(("CHIRPS", "https://www.chc.ucsb.edu/data/chirps"), _repo("DavidWinrich101/virawatch")),
           licences=("CC-BY-3.0-IGO",)),
    Source("lga_rainfall", "LGA rainfall climatology 2001–2016 (EMOD climate inputs from GSOD stations)",
           "Institute for Disease Modeling via the Nigeria HBHI modelling group (numalariamodeling)",
           "within-state shape of LGA rainfall (rescaled to state CHIRPS); LGA rain seasons 2001–2016 (SMC planning)",
           "Apache-2.0",
           "repository numalariamodeling/hbhi-nigeria-publication-2021 (commit dcc2f01e)", spdx="Apache-2.0",
           pages=(_HBHI,),
           licences=("Apache-2.0",)),
    Source("hbhi_inputs", "HBHI LGA model inputs: ITN use, case management, archetypes, routine-data seasonality",
           "numalariamodeling / Ozodiegwu et al., Malaria Journal 2023 (derived from DHS/MIS microdata and "
           "NMEP routine data)", "coverage context per LGA; independent seasonality check",
           "Apache-2.0", "repository numalariamodeling/hbhi-nigeria-publication-2021",
           "Model inputs assigned to all LGAs; LGAs without survey clusters inherit state or archetype values.",
           spdx="Apache-2.0",
           pages=(_HBHI,),
           licences=("Apache-2.0",)),
    Source("who_smc_states", "SMC treatments per state and cycle, 2013–2021",
           "Nigeria NMEP, as compiled for the WHO Nigeria Malaria Report 2022 (sepmein)",
           "children treated per cycle in a state's last SMC campaign; the check of the SMC rule against delivery",
           "Apache-2.0 (repository sepmein/nigeria_malaria_report_2022)",
           "repository sepmein/nigeria_malaria_report_2022 (commit 0982fb23), 2023-04-09-nga_smc.csv",
           "Treatments per cycle, not children or coverage; 2019 is missing in the source.", spdx="Apache-2.0",
           pages=(_repo("sepmein/nigeria_malaria_report_2022"),), licences=("Apache-2.0",)),
    Source("hbhi_smc_rounds", "SMC rounds per LGA with dates, 2013–2019",
           "numalariamodeling / Ozodiegwu et al., Malaria Journal 2023 (NMEP and post-campaign data)",
           "the check of the SMC rule and its first-cycle month against the LGAs and rounds delivered",
           "Apache-2.0", "repository numalariamodeling/hbhi-nigeria-publication-2021 (commit dcc2f01e)",
           "Round dates are model days (approximate to a few days); coverages are model inputs and are not used.",
           spdx="Apache-2.0", pages=(_HBHI,), licences=("Apache-2.0",)),
    Source("dhs_sepmein", "DHS/MIS survey indicators (2010, 2015 MIS; 2018 DHS; 2021 MIS) and MAP-style incidence",
           "The DHS Program / NMIS tabulations and Malaria Atlas Project-style admin-1 incidence, as used in "
           "the WHO Nigeria Malaria Report 2022 (sepmein)",
           "survey positivity trends, net use and access; incidence for the external agreement check only",
           "Apache-2.0 (repository sepmein/nigeria_malaria_report_2022)",
           "repository sepmein/nigeria_malaria_report_2022 (commit 0982fb23)",
           "Incidence figures are modelled (MAP/WHO), not observations.", spdx="Apache-2.0",
           pages=(("The DHS Program", "https://dhsprogram.com/"), _repo("sepmein/nigeria_malaria_report_2022")),
           licences=("Apache-2.0",)),
    Source("nmis2021_soehtutaung", "2021 NMIS tabulations and ward walking time to primary health care",
           "Soe H Aung, MCDA Spatial DHS project (NMIS 2021 microdata; WorldPop v2.1; GRID3 facilities; MAP "
           "walking friction surface)", "2021 state survey figures; travel time to care", "MIT",
           "repository SoeHtutAung/MCDA-Spatial-DHS-Rshiny-Nigeria",
           "Travel time is walking time; the state mean uses band midpoints (an approximation).", spdx="MIT",
           pages=(_SOE,),
           licences=("MIT",)),
    Source("malariariskxai", "Four 2018 state survey values", "AyeshaCamran/MalariaRiskXAI",
           "fills four 2018 state gaps (Lagos, Anambra, Imo)", "MIT (stated in the README)",
           "repository AyeshaCamran/MalariaRiskXAI, data/data_cleaned_merged.csv (commit 193cac51)",
           "Not verified against the NDHS report.", spdx="MIT",
           pages=(_repo("AyeshaCamran/MalariaRiskXAI"),),
           licences=("MIT",)),
    Source("map_irs_2022", "Malaria Atlas Project: Africa IRS coverage, 2022 (release 2024-06)",
           "Malaria Atlas Project (MAP), Telethon Kids Institute / Curtin University",
           "irs_coverage per LGA and state (0 everywhere)",
           "CC BY 4.0 (MAP surfaces); MIT (copying repository)",
           "repository SoeHtutAung/MCDA-Spatial-DHS-Rshiny-Nigeria, outputs/plots/mal_irs_final.tif "
           "(commit 8b9859f5), averaged inside each eHA/GRID3 LGA outline",
           "Modelled surface; every pixel of Nigeria is 0. PMI AIRS sprayed only two Nasarawa LGAs (Doma, "
           "Nasarawa Eggon) around 2011–2013, which a 2022 surface does not show.",
           "Malaria Atlas Project, Africa IRS coverage, 2022 (MAP data release 2024-06), CC BY 4.0.",
           spdx="CC-BY-4.0",
           pages=(("Malaria Atlas Project", "https://malariaatlas.org/"), _SOE),
           licences=("CC-BY-4.0", "MIT")),
    Source("uw_sae_itn", "Small-area estimates of ITN use by children under 5 (ML_NETC_C_ITN), NDHS 2018 and 2024",
           "University of Washington, Multi-Indicator SAE website (model-based small-area estimates from DHS "
           "microdata, SUMMER/surveyPrev family)",
           "itn_use per LGA and state (2018), itn_use_2024, 90% intervals per LGA",
           "none stated in the repository; credit the University of Washington SAE project and The DHS Program",
           "repository richardli/gatesweb, docs/estimates/NGA_combined_estimates.csv (commit 00168347, "
           "indicator ML_NETC_C_ITN only)",
           "Model-based estimates for children under 5, not whole-population net use; the interval is 90%.",
           "University of Washington Multi-Indicator Small Area Estimation, Nigeria estimates "
           "(richardli/gatesweb); underlying data: NPC and ICF, Nigeria DHS 2018 and 2024.", terms=NONE_STATED,
           pages=(_repo("richardli/gatesweb"),),
           licences=()),
    Source("hbhi_pfpr_lga_2018", "NDHS 2018 microscopy positivity per LGA with children tested",
           "numalariamodeling / Ozodiegwu et al., Malaria Journal 2023 (aggregated from NDHS 2018 microdata)",
           "lower bound of children tested by microscopy per state, 2018 (survey-trend `sample`)",
           "Apache-2.0",
           "repository numalariamodeling/hbhi-nigeria-publication-2021, IPTi_scaling/IPTi_input_files/"
           "nigeria_dhs/data_analysis/bin/ds_para_prevalence_2018.csv (commit baf3ebdc)",
           "Covers the 8,118 children in clusters matched to an LGA, an undercount of the survey's sample; "
           "LGA values are never published.",
           "Ozodiegwu ID et al., Application of mathematical modelling to inform national malaria intervention "
           "planning in Nigeria, Malaria Journal 2023 (doi:10.1186/s12936-023-04563-w); data: NPC and ICF, "
           "Nigeria DHS 2018.", spdx="Apache-2.0",
           pages=(("paper (doi:10.1186/s12936-023-04563-w)", "https://doi.org/10.1186/s12936-023-04563-w"), _HBHI),
           licences=("Apache-2.0",)),
    Source("ndhs2018_clusters", "NDHS 2018 clusters per state",
           "Fuglstad, Li and Wakefield, 'The two cultures of prevalence mapping' case study (NDHS 2018 microdata)",
           "lower bound of survey clusters per state, 2018 (survey-trend `sample`)",
           "none stated (README: DHS aggregated data may be shared); only per-state counts are used",
           "repository gafuglstad/prevalence-mapping, Nigeria-Vac/Data/Nigeria_AGG_DHS/preparedDHSdata.RData "
           "(commit 65dae291), counted per state",
           "Counts clusters holding a child aged 12–23 months: 1,324 of the survey's 1,389.",
           "Fuglstad, Li and Wakefield, 'The two cultures of prevalence mapping', case-study repository "
           "gafuglstad/prevalence-mapping; data: NPC and ICF, Nigeria DHS 2018.", terms=AGGREGATES,
           pages=(_repo("gafuglstad/prevalence-mapping"),),
           licences=()),
    Source("numalaria_urban_clusters", "Urban survey clusters of NMIS 2010, NMIS 2015 and NDHS 2018",
           "numalariamodeling, urban malaria DHS analysis (aggregated from NMIS/NDHS microdata)",
           "lower bounds of clusters and children tested by microscopy per state, 2010/2015/2018 "
           "(survey-trend `sample`)",
           "Apache-2.0",
           "repository numalariamodeling/urban-malaria-dhs-publication-2021, data/multivariate_analysis_dataset.csv "
           "(commit 903c43f6)",
           "Urban clusters only, so every count is a lower bound for the state.",
           "numalariamodeling/urban-malaria-dhs-publication-2021 (Northwestern University malaria modelling "
           "group); data: NMCP, NPC and ICF, Nigeria MIS 2010 and 2015, Nigeria DHS 2018.", spdx="Apache-2.0",
           pages=(_repo("numalariamodeling/urban-malaria-dhs-publication-2021"),),
           licences=("Apache-2.0",)),
    Source("dhis2_lga_cases", "Routine monthly malaria cases per LGA, seven states, 2020–2023 (NHMIS/DHIS2 export)",
           "Nigeria NHMIS/DHIS2, via the repository dagbashingu/malaria_rainfall_project",
           "fitting and checking the seasons and the month terms (validation statistics only)",
           "none stated; the rows are not redistributed",
           "repository dagbashingu/malaria_rainfall_project, data/Malaria Cases.csv (commit 24976f71)",
           "Used inside the pipeline only. No value of the series, however rescaled, is in any release; only "
           "correlations, errors and counts of months and areas are published.", terms=SUMMARY_ONLY,
           pages=(_repo("dagbashingu/malaria_rainfall_project"),),
           licences=()),
)


# The licence of what the service itself makes (scores, ranges, forecasts, seasons, aggregates and
# the tables that hold them). It follows from the licence table below (`licence_table`): every
# source whose values a release carries is public domain or under an attribution-only licence
# (CC BY 4.0, CC BY-IGO, Apache-2.0, MIT), or states none (then no licence is granted for its
# values); none is ShareAlike or NonCommercial, so an attribution licence keeps every input's duty
# and adds none that conflicts. Why this one: docs/releases.md#licence.
DERIVED_LICENCE = {
    "name": "CC-BY-4.0",
    "title": "Creative Commons Attribution 4.0 International",
    "path": "https://creativecommons.org/licenses/by/4.0/",
}
DERIVED_LICENCE_TERMS = (
    "The figures this service makes (risk scores and their ranges, forecasts, transmission seasons, "
    "population-weighted state values) and the tables holding them are licensed CC BY 4.0: credit the "
    "service with the citation above and the sources below. Figures passed on unchanged from a source "
    "(coverage context, survey values, outlines, population, codes and names) keep that source's terms and "
    "credit; no CC BY licence is claimed over a source's own rows. Where a source states no licence (the "
    "University of Washington net-use estimates) no licence is granted for its figures; the NDHS 2018 "
    "cluster counts are aggregates, as that source allows. The routine DHIS2 case series is used only to "
    "fit and check the model: no value of it is in the release, only summary statistics. Each file's terms: "
    "the licence table on /docs/attribution.html and `licenses` of each resource in datapackage.json."
)


def service_citation(release_id: str, model_version: str | None, updated_at: str, base_url: str,
                     bundle_name: str) -> str:
    """The one citation line of a release, with the absolute address of its pinned bundle."""
    return (f"Malaria risk data service for Nigeria, release {release_id} (model {model_version}), data loaded "
            f"{updated_at[:10]}. {base_url}/v1/downloads/{release_id}/{bundle_name}. Licence: CC BY 4.0 "
            "(derived figures; sources keep their own).")


def source(key: str) -> Source:
    """The credited source with this key; KeyError names the unknown key."""
    for s in SOURCES:
        if s.key == key:
            return s
    raise KeyError(f"no attribution entry {key!r}")


def credit(key: str) -> str:
    """One line for a `source` field: name, provider and licence."""
    s = source(key)
    return f"{s.name}. {s.provider}. Licence: {s.licence}."


def markdown_table(sources: tuple[Source, ...] = SOURCES) -> str:
    """The list as a Markdown table (for a README): source, provider, licence, citation."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| Source | Provider | Used for | Licence | Cite as |", "|---|---|---|---|---|"]
    lines += [f"| {cell(s.name)} | {cell(s.provider)} | {cell(s.used_for)} | {cell(s.licence)} | {cell(s.citation)} |"
              for s in sources]
    return "\n".join(lines) + "\n"


# --- the licence table: each published artefact -> its sources -> their terms -> its terms ------------------


@dataclass(frozen=True)
class Artefact:
    """One published artefact and the sources behind it.

    `derived`: sources the service's own figures rest on (those figures are CC BY 4.0);
    `passed_on`: sources whose values the artefact carries unchanged (they keep their terms);
    `summary_only`: restricted sources that contribute summary statistics and nothing else.
    """

    name: str  # a route path, a bundle file, or a docs file (figure)
    kind: str  # "route", "bundle file" or "figure"
    derived: tuple[str, ...] = ()
    passed_on: tuple[str, ...] = ()
    summary_only: tuple[str, ...] = ()
    terms: str = ""  # stated outright where the artefact only gathers others (the zip)

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.derived, *self.passed_on, *self.summary_only)))


_SURVEYS = ("dhs_sepmein", "nmis2021_soehtutaung", "malariariskxai")
_SAMPLE = ("hbhi_pfpr_lga_2018", "ndhs2018_clusters", "numalaria_urban_clusters")
_SEASONS = ("chirps", "lga_rainfall", "hbhi_inputs")
_NAMES = ("ocha_codab", "state_names")
_SCORE = (*_SURVEYS, "hbhi_pfpr_lga_2018", "numalaria_urban_clusters", *_SEASONS, "population", "boundaries")
_CONTEXT = ("dhs_sepmein", "uw_sae_itn", "map_irs_2022", "nmis2021_soehtutaung")

# Per dataset of the route table (edge.routes.Route.dataset): (derived, passed on, summary only).
DATASET_SOURCES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "risk": (_SCORE, (*_NAMES, "population"), ("dhis2_lga_cases",)),
    "history": (_SCORE, _NAMES, ("dhis2_lga_cases",)),
    "context": (("population", "nmis2021_soehtutaung"), (*_CONTEXT, *_NAMES, "population", "boundaries"), ()),
    "transmission": ((*_SEASONS, *_SURVEYS, *_SAMPLE), (*_NAMES, *_SURVEYS, *_SAMPLE), ("dhis2_lga_cases",)),
    "ratios": (_SEASONS, _NAMES, ("dhis2_lga_cases",)),
    "smc": ((*_SEASONS, "who_smc_states", "hbhi_smc_rounds"), (*_NAMES, "who_smc_states", "hbhi_smc_rounds"),
            ("dhis2_lga_cases",)),
    "geography": ((), ("boundaries", *_NAMES, "population"), ()),
    "downloads": ((), (), ()),  # the list of the bundle's files (each file has its own row)
    "releases": ((), (), ()),  # release metadata
}
# Per bundle table or outline file (both formats), as downloads.py names them.
BUNDLE_SOURCES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "risk_lga_month": (_SCORE, (*_NAMES, "population"), ("dhis2_lga_cases",)),
    "risk_state_month": (_SCORE, ("state_names", "population"), ("dhis2_lga_cases",)),
    "context_lga": (("population",), (*_CONTEXT, *_NAMES, "population", "boundaries"), ()),
    "context_state": (("population", "nmis2021_soehtutaung"), (*_CONTEXT, "state_names", "population"), ()),
    "transmission_lga_month": (_SEASONS, ("ocha_codab", "state_names"), ("dhis2_lga_cases",)),
    "transmission_state_month": (_SEASONS, ("state_names",), ("dhis2_lga_cases",)),
    "season_ratio_lga": (_SEASONS, ("ocha_codab", "state_names"), ("dhis2_lga_cases",)),
    "season_ratio_state": (_SEASONS, ("state_names",), ("dhis2_lga_cases",)),
    "smc_lga": ((*_SEASONS, "hbhi_smc_rounds"), ("ocha_codab", "state_names", "hbhi_smc_rounds"),
                ("dhis2_lga_cases",)),
    "smc_state": ((*_SEASONS, "who_smc_states", "hbhi_smc_rounds"),
                  ("state_names", "who_smc_states", "hbhi_smc_rounds"), ("dhis2_lga_cases",)),
    "survey_trend": (("population",), (*_SURVEYS, *_SAMPLE, "state_names"), ()),
    "gazetteer": (("population",), ("ocha_codab", "boundaries", "population", "state_names"), ()),
    "lga_outlines": ((), ("boundaries", "ocha_codab", "state_names"), ()),
    "state_outlines": (("boundaries",), ("state_names",), ()),
}
# The validation report and its figures: the service's checks of its own model.
FIGURE_SOURCES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "docs/smc-check.json": (("chirps", "lga_rainfall"), ("who_smc_states", "hbhi_smc_rounds", *_NAMES), ()),
    "docs/validation.json": ((*_SCORE, "dhs_sepmein"), _NAMES, ("dhis2_lga_cases",)),
    "docs/figures/*.svg": ((*_SCORE,), (), ("dhis2_lga_cases",)),
    "docs/skill.json": (_SEASONS, (), ("dhis2_lga_cases",)),
    # the frozen forecast rounds (pipeline/model/hub.py): ratio quantiles, no count
    "docs/forecasts/model-output/malaria-risk-ratios/*.csv": (_SEASONS, (), ("dhis2_lga_cases",)),
    # the map's screen-scale outlines (pipeline/datasets/map_outlines.py): simplified, states dissolved
    "docs/map/*.geojson": (("boundaries",), ("boundaries", "ocha_codab", "state_names"), ()),
}


def artefacts() -> list[Artefact]:
    """Every published artefact: each route of the route table, each bundle file, each figure."""
    from edge.routes import DOWNLOAD_FILE, ROUTES

    out = [Artefact(r.path, "route", *DATASET_SOURCES[r.dataset]) for r in ROUTES]
    out.append(Artefact(DOWNLOAD_FILE.path, "route"))  # serves the bundle files below, each with its own row
    out += [Artefact(f"{stem}.csv / .parquet" if "outlines" not in stem else f"{stem}.geojson / .parquet",
                     "bundle file", *parts) for stem, parts in BUNDLE_SOURCES.items()]
    out.append(Artefact("malaria_risk_nigeria.zip (with README.md, datapackage.json, SHA256SUMS)", "bundle file",
                        terms="Each file as its own row above; README.md, datapackage.json and SHA256SUMS "
                              "are service metadata (CC BY 4.0)."))
    out += [Artefact(name, "figure", *parts) for name, parts in FIGURE_SOURCES.items()]
    return out


def _part(s: Source) -> str:
    if s.terms == NONE_STATED:
        return f"{s.name}: no licence stated by the source; none is granted here (served as credited context)"
    if s.terms == AGGREGATES:
        return f"{s.name}: aggregates only, as the source allows ({s.licence})"
    return f"{s.name}: {s.licence}"


def artefact_terms(a: Artefact) -> str:
    """The terms of one artefact, from its sources' terms: CC BY 4.0 over the service's own figures,
    each passed-on source's own terms over its values; a restricted source may not be passed on."""
    if a.terms:
        return a.terms
    passed = [source(k) for k in a.passed_on]
    leaked = [s.key for s in passed if s.terms == SUMMARY_ONLY]
    if leaked:
        raise ValueError(f"{a.name} would pass on the rows of {leaked}, which may leave only as summary statistics")
    if not a.derived and not passed:
        return "CC BY 4.0 (service metadata)"
    parts = []
    if a.derived:
        parts.append("CC BY 4.0 for the service's figures, crediting the sources listed")
    if passed:
        parts.append("Values passed on unchanged keep their source's terms — "
                     + "; ".join(_part(s) for s in passed))
    return ". ".join(parts) + "."


def licence_table() -> list[dict[str, object]]:
    """Rows of the licence table (sources page, datapackage.json): artefact, sources and their terms, terms."""
    rows: list[dict[str, object]] = []
    for a in artefacts():
        rows.append({
            "artefact": a.name, "kind": a.kind,
            "sources": [{"key": k, "name": source(k).name, "licence": source(k).licence, "terms": source(k).terms,
                         "use": "summary statistics only" if k in a.summary_only else
                                "passed on unchanged" if k in a.passed_on and k not in a.derived else
                                "passed on and derived from" if k in a.passed_on else "derived from"}
                        for k in a.sources],
            "terms": artefact_terms(a),
        })
    return rows


def resource_licences(a: Artefact) -> list[dict[str, str]]:
    """The `licenses` of one bundle resource: the service's licence over its own figures (when it
    makes any), then each passed-on source's licence; sources without one are named, not licensed."""
    out: list[dict[str, str]] = []
    if a.derived or not a.passed_on:
        out.append({**DERIVED_LICENCE, "title": DERIVED_LICENCE["title"] + " (the service's figures)"})
    for s in (source(k) for k in a.passed_on):
        if s.terms == ATTRIBUTION:
            out.append({"name": s.spdx, "title": f"values from {s.name}: {s.licence}"})
        else:
            out.append({"name": "other-closed" if s.terms == NONE_STATED else "other-at",
                        "title": f"values from {s.name}: {s.licence}; "
                                 + ("no licence granted" if s.terms == NONE_STATED else "aggregates only")})
    return out

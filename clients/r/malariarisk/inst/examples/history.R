# One LGA's history for a date range, and the highest-risk LGAs of the latest month.
#   MALARIA_RISK_BASE_URL=... MALARIA_RISK_API_KEY=... Rscript history.R NG020001 2024-01 2024-12
library(malariarisk)
args <- commandArgs(trailingOnly = TRUE)
lga <- if (length(args) >= 1) args[[1]] else "NG020001"
from <- if (length(args) >= 2) args[[2]] else "2024-01"
to <- if (length(args) >= 3) args[[3]] else "2024-12"
mr <- mr_client()
h <- mr_history_lga(mr, lga)
# basis: survey_fit (within the survey rounds) or baseline_x_season (after the last survey);
# rank_low..rank_high: the 80 % range of the LGA's rank within its state (overlapping ranges: no real difference)
print(h[h$period >= from & h$period <= to, c("period", "kind", "score", "score_low", "score_high", "level", "basis",
                                             "rank", "rank_low", "rank_high")])
latest <- mr_periods(mr)$last_estimated
print(head(mr_risk_lgas_all(mr, latest)[, c("state_code", "lga", "score", "level", "rank", "rank_low", "rank_high",
                                             "evidence", "survey_children_2018_band")], 5))

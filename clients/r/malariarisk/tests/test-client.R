# Runs against a live service named by MALARIA_RISK_TEST_URL (the repository's test suite starts
# one on loopback and runs R CMD check with these variables); skipped without it.
library(malariarisk)

# booleans: the CSV's true/false are logicals (empty cells NA); codes and other text stay text
b <- mr_read_csv("lga_code,lga,is_urban,small_sample,level\nNG020001,Demsa,true,,low\nNG020002,Fufore,false,true,high\n")
stopifnot(identical(b$is_urban, c(TRUE, FALSE)), identical(b$small_sample, c(NA, TRUE)),
          is.character(b$lga_code), is.character(b$level))

url <- Sys.getenv("MALARIA_RISK_TEST_URL")
if (!nzchar(url)) {
  cat("MALARIA_RISK_TEST_URL not set: the client tests need a running service; skipped\n")
} else {
  key <- Sys.getenv("MALARIA_RISK_TEST_KEY")
  mr <- mr_client(url, key)

  # a history in one call, equal to the JSON route's months
  h <- mr_history_lga(mr, "NG020001")
  js <- mr_json_months <- jsonlite::fromJSON(httr2::resp_body_string(httr2::req_perform(
    httr2::req_headers(httr2::req_url_query(httr2::request(paste0(url, "/v1/history/lgas")), lga = "NG020001"),
                       Authorization = paste("Bearer", key)))))$months
  stopifnot(identical(h$period, js$period), isTRUE(all.equal(h$score, js$score)), nrow(h) > 12)
  stopifnot(is.logical(h$provisional), identical(h$provisional, js$provisional))
  stopifnot(mr$stats$requests == 1)

  # a state's history with forecasts; Nasarawa's code stays "NA"
  s <- mr_history_state(mr, "NA", forecasts = TRUE)
  stopifnot(all(s$state_code == "NA"), !anyNA(s$state_code), tail(s$kind, 1) == "forecast")

  # a whole-country month: 774 LGAs, highest first, codes as text
  latest <- mr_periods(mr)$last_estimated
  m <- mr_risk_lgas_all(mr, latest)
  stopifnot(nrow(m) == 774, is.character(m$lga_code), !anyDuplicated(m$lga_code),
            sum(m$state_code == "NA") > 0, !is.unsorted(rev(m$score)))
  stopifnot(is.logical(m$is_urban), !anyNA(m$is_urban), any(m$is_urban), !all(m$is_urban))

  # revalidation: the same answer again is a 304 from the cache
  again <- mr_risk_lgas_all(mr, latest)
  stopifnot(identical(again, m), mr$stats$not_modified == 1)

  # a bundle file, checked against SHA256SUMS
  dest <- tempfile("bundle")
  path <- mr_download(mr, "gazetteer.csv", dest)
  listed <- mr_downloads(mr)$files
  want <- listed$sha256[listed$name == "gazetteer.csv"]
  con <- file(path, open = "rb")
  got <- as.character(openssl::sha256(con))
  close(con)
  stopifnot(isTRUE(as.vector(got) == want), nrow(mr_read_csv(paste(readLines(path, encoding = "UTF-8"), collapse = "\n"))) == 774)

  # projected counts: expected = cases x ratio of the published ratio table, from the API and offline
  pr <- mr_project_counts(mr, "KN", "2024-06", 100, horizons = 2)
  kn <- mr_ratios_states(mr)
  kn <- kn[kn$state_code == "KN" & kn$start_month == 6, ]
  ok <- pr$status %in% c("ok", "persistence")
  stopifnot(nrow(pr) == 2, all(pr$period == c("2024-07", "2024-08")),
            isTRUE(all.equal(pr$expected[ok], mr_whole_cases(100 * kn$ratio[match(pr$horizon[ok], kn$horizon)]))),
            all(is.na(pr$expected[!ok])))
  rz <- mr_download(mr, "season_ratio_state.csv", dest)
  off <- mr_project_counts(area = "KN", month = "2024-06", cases = 100, horizons = 2, bundle = dest)
  stopifnot(identical(off$expected, pr$expected))
  err <- tryCatch(mr_project_counts(mr, "KN", "2024-13", 1), error = function(e) conditionMessage(e))
  stopifnot(startsWith(err, "mr_project_counts:"))

  # SMC planning: every state, and the LGAs of one state
  smc <- mr_smc(mr)
  stopifnot(nrow(smc) == 37, isTRUE(smc$eligible[smc$state_code == "KN"]),
            identical(smc$eligible[smc$state_code == "LA"], FALSE), is.character(smc$cycle_months))
  kn_smc <- mr_smc(mr, "KN")
  stopifnot(nrow(kn_smc) == 44, all(kn_smc$state_code == "KN"), all(grepl("^NG020", kn_smc$lga_code)))

  # problems stop with their code
  err <- tryCatch(mr_risk_lgas(mr, "XX"), mr_api_error = function(e) e)
  stopifnot(inherits(err, "mr_api_error"), err$status == 404, err$code == "UNKNOWN_STATE")
  # a name suggests the code; a forecast month names the function to use
  err <- tryCatch(mr_risk_lgas(mr, "Kano"), mr_api_error = function(e) e)
  stopifnot(err$code == "UNKNOWN_STATE", grepl("`KN`", err$message, fixed = TRUE),
            identical(err$suggestions$state_code, "KN"))
  err <- tryCatch(mr_history_lga(mr, "Bunkure"), mr_api_error = function(e) e)
  stopifnot(err$code == "UNKNOWN_LGA", "NG020006" %in% err$suggestions$lga_code)
  err <- tryCatch(mr_risk_states(mr, mr_periods(mr)$last_forecast), mr_api_error = function(e) e)
  stopifnot(err$code == "FORECAST_PERIOD", grepl("mr_forecasts_lgas()", err$message, fixed = TRUE),
            !grepl("/v1/", err$message, fixed = TRUE))
  narrow <- mr_client(url, Sys.getenv("MALARIA_RISK_TEST_NARROW_KEY"))
  err <- tryCatch(mr_history_state(narrow, "KN", forecasts = TRUE), mr_api_error = function(e) e)
  stopifnot(err$status == 403, err$code == "SCOPE_REQUIRED")

  # outlines as sf, where sf is installed
  if (requireNamespace("sf", quietly = TRUE)) {
    kn <- mr_boundaries(mr, "KN", sf = TRUE)
    stopifnot(inherits(kn, "sf"), nrow(kn) == 44)
  }

  # a 429 is waited out: one request a minute, two seconds before the minute ends
  limited <- mr_client(Sys.getenv("MALARIA_RISK_TEST_LIMITED_URL"), Sys.getenv("MALARIA_RISK_TEST_LIMITED_KEY"))
  stopifnot(nzchar(mr_periods(limited)$last_estimated))
  st <- mr_risk_states(limited)
  stopifnot(nrow(st) == 37, limited$stats$requests == 3, limited$stats$waited_seconds >= 1,
            limited$stats$waited_seconds <= 3)
  cat("client tests passed\n")
}

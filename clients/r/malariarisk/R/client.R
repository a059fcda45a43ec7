# The client: a list holding the base URL, the key and an ETag cache (an environment, so the cache
# is shared by every call made with one client).

code_columns <- c("state_code", "lga_code", "eha_code", "admin1_pcode", "admin2_pcode", "release_id")

mr_client <- function(base_url = Sys.getenv("MALARIA_RISK_BASE_URL"),
                      api_key = Sys.getenv("MALARIA_RISK_API_KEY"),
                      max_wait = 90, retries = 3, cache_dir = NULL, timeout = 60) {
  if (!nzchar(base_url)) stop("no base URL: pass base_url or set MALARIA_RISK_BASE_URL", call. = FALSE)
  if (!nzchar(api_key)) stop("no API key: pass api_key or set MALARIA_RISK_API_KEY", call. = FALSE)
  structure(list(base_url = sub("/+$", "", base_url), api_key = api_key, max_wait = max_wait,
                 retries = retries, cache_dir = cache_dir, timeout = timeout,
                 cache = new.env(parent = emptyenv()),
                 stats = list2env(list(requests = 0, not_modified = 0, waited_seconds = 0))),
            class = "mr_client")
}

print.mr_client <- function(x, ...) {
  cat("<mr_client ", x$base_url, ", key ", substr(x$api_key, 1, 9), "...>\n", sep = "")
  invisible(x)
}

# The service's details name HTTP routes ("use /v1/forecasts/lgas"); R users call functions, so a
# message names the function instead. Longest paths first (/v1/risk/lgas/all before /v1/risk/lgas).
mr_functions <- c(
  "/v1/risk/lgas/all" = "mr_risk_lgas_all()", "/v1/risk/states" = "mr_risk_states()",
  "/v1/risk/lgas" = "mr_risk_lgas()", "/v1/forecasts/states" = "mr_forecasts_states()",
  "/v1/forecasts/lgas" = "mr_forecasts_lgas()", "/v1/history/states" = "mr_history_state()",
  "/v1/history/lgas" = "mr_history_lga()", "/v1/context/states" = "mr_context_states()",
  "/v1/context/lgas" = "mr_context_lgas()", "/v1/transmission/states" = "mr_transmission_states()",
  "/v1/transmission/lgas" = "mr_transmission_lgas()", "/v1/boundaries/lgas" = "mr_boundaries()",
  "/v1/periods" = "mr_periods()", "/v1/downloads" = "mr_downloads()", "/v1/releases" = "mr_releases()")

mr_for_client <- function(detail) {
  for (route in names(mr_functions)) {
    detail <- gsub(paste0(route, "(?![A-Za-z0-9_/])"), mr_functions[[route]], detail, perl = TRUE)
  }
  detail
}

mr_problem <- function(resp) {
  body <- tryCatch(jsonlite::fromJSON(httr2::resp_body_string(resp), simplifyVector = FALSE),
                   error = function(e) list())
  code <- if (is.null(body$code)) "" else body$code
  detail <- mr_for_client(if (is.null(body$detail)) httr2::resp_status_desc(resp) else body$detail)
  # the codes an unknown state or LGA most likely meant: a data frame (empty when there are none)
  suggestions <- if (length(body$suggestions)) {
    do.call(rbind, lapply(body$suggestions, as.data.frame, stringsAsFactors = FALSE))
  } else data.frame()
  structure(class = c("mr_api_error", "error", "condition"),
            list(message = paste0(httr2::resp_status(resp), " ", code, ": ", detail),
                 call = NULL, status = httr2::resp_status(resp), code = code, detail = detail,
                 suggestions = suggestions))
}

mr_wait_seconds <- function(resp) {
  ra <- httr2::resp_header(resp, "retry-after")
  if (!is.null(ra) && grepl("^[0-9]+$", ra)) return(as.numeric(ra))
  rl <- httr2::resp_header(resp, "ratelimit")
  if (!is.null(rl)) {
    m <- regmatches(rl, regexec("(^|[;, ])t=([0-9]+)", rl))[[1]]
    if (length(m) == 3) return(as.numeric(m[3]))
  }
  NA_real_
}

# One request; 429 (and 503 with Retry-After) are waited out as the server says, up to max_wait.
mr_send <- function(client, path, query = list(), headers = list(), path_out = NULL) {
  query <- Filter(Negate(is.null), query)
  waited <- 0
  for (attempt in 0:client$retries) {
    req <- httr2::request(paste0(client$base_url, path))
    if (length(query)) req <- do.call(httr2::req_url_query, c(list(req), query))
    req <- do.call(httr2::req_headers, c(list(req, Authorization = paste("Bearer", client$api_key),
                                             `User-Agent` = "malariarisk-r/0.1"), headers))
    req <- httr2::req_timeout(req, client$timeout)
    req <- httr2::req_error(req, is_error = function(resp) FALSE)
    client$stats$requests <- client$stats$requests + 1
    resp <- httr2::req_perform(req, path = path_out)
    status <- httr2::resp_status(resp)
    if (!(status %in% c(429, 503))) return(resp)
    wait <- mr_wait_seconds(resp)
    if (status == 503 && is.na(wait)) return(resp)
    if (is.na(wait)) wait <- 1
    if (attempt == client$retries || waited + wait > client$max_wait) stop(mr_problem(resp))
    Sys.sleep(wait)
    waited <- waited + wait
    client$stats$waited_seconds <- client$stats$waited_seconds + wait
  }
}

mr_cache_file <- function(client, key, suffix) {
  file.path(client$cache_dir, paste0(digest_key(key), suffix))
}

digest_key <- function(key) as.character(openssl::sha256(key))

# The answer's body as text, revalidated with the cached ETag when there is one.
mr_text <- function(client, path, query = list()) {
  query <- Filter(Negate(is.null), query)
  key <- paste0(path, "?", paste(names(query), unlist(query), sep = "=", collapse = "&"))
  cached <- client$cache[[key]]
  if (is.null(cached) && !is.null(client$cache_dir) && file.exists(mr_cache_file(client, key, ".etag"))) {
    cached <- list(etag = readLines(mr_cache_file(client, key, ".etag"), warn = FALSE),
                   body = readChar(mr_cache_file(client, key, ".body"),
                                   file.size(mr_cache_file(client, key, ".body")), useBytes = TRUE))
  }
  headers <- if (is.null(cached)) list() else list(`If-None-Match` = cached$etag)
  resp <- mr_send(client, path, query, headers)
  status <- httr2::resp_status(resp)
  if (status == 304 && !is.null(cached)) {
    client$stats$not_modified <- client$stats$not_modified + 1
    return(cached$body)
  }
  if (status >= 400) stop(mr_problem(resp))
  body <- httr2::resp_body_string(resp, encoding = "UTF-8")
  etag <- httr2::resp_header(resp, "etag")
  if (!is.null(etag)) {
    client$cache[[key]] <- list(etag = etag, body = body)
    if (!is.null(client$cache_dir)) {
      dir.create(client$cache_dir, showWarnings = FALSE, recursive = TRUE)
      writeBin(charToRaw(enc2utf8(body)), mr_cache_file(client, key, ".body"))
      writeLines(etag, mr_cache_file(client, key, ".etag"))
    }
  }
  body
}

mr_json <- function(client, path, query = list()) {
  jsonlite::fromJSON(mr_text(client, path, query), simplifyVector = TRUE)
}

mr_read_csv <- function(text) {
  header <- strsplit(sub("\n.*", "", text), ",", fixed = TRUE)[[1]]
  codes <- intersect(code_columns, header)
  classes <- stats::setNames(rep("character", length(codes)), codes)
  con <- textConnection(text, encoding = "UTF-8")
  on.exit(close(con))
  df <- utils::read.csv(con, na.strings = "", stringsAsFactors = FALSE, colClasses = classes,
                        check.names = FALSE, encoding = "UTF-8")
  mr_logicals(df)
}

# The service writes booleans (is_urban, provisional, small_sample) as `true`/`false`, which
# read.csv leaves as text: a text column holding nothing else (and empty cells) becomes logical.
mr_logicals <- function(df) {
  for (col in names(df)) {
    x <- df[[col]]
    if (is.character(x) && any(!is.na(x)) && all(is.na(x) | x %in% c("true", "false"))) {
      df[[col]] <- ifelse(is.na(x), NA, x == "true")
    }
  }
  df
}

mr_table <- function(client, path, query = list()) {
  mr_read_csv(mr_text(client, path, c(query, list(format = "csv"))))
}

mr_periods <- function(client) mr_json(client, "/v1/periods")
mr_releases <- function(client) mr_json(client, "/v1/releases")
mr_downloads <- function(client) mr_json(client, "/v1/downloads")
mr_transmission_states <- function(client) mr_json(client, "/v1/transmission/states")

mr_risk_states <- function(client, period = NULL) mr_table(client, "/v1/risk/states", list(period = period))
mr_risk_lgas <- function(client, state, period = NULL) {
  mr_table(client, "/v1/risk/lgas", list(state = state, period = period))
}
mr_risk_lgas_all <- function(client, period = NULL) mr_table(client, "/v1/risk/lgas/all", list(period = period))
mr_history_state <- function(client, state, forecasts = FALSE) {
  mr_table(client, "/v1/history/states", list(state = state, include = if (forecasts) "forecasts"))
}
mr_history_lga <- function(client, lga_code, forecasts = FALSE) {
  mr_table(client, "/v1/history/lgas", list(lga = lga_code, include = if (forecasts) "forecasts"))
}
mr_forecasts_states <- function(client, months = 4) {
  mr_table(client, "/v1/forecasts/states", list(months = months))
}
mr_forecasts_lgas <- function(client, state, months = 4) {
  mr_table(client, "/v1/forecasts/lgas", list(state = state, months = months))
}
mr_context_states <- function(client) mr_table(client, "/v1/context/states")
mr_context_lgas <- function(client, state) mr_table(client, "/v1/context/lgas", list(state = state))
mr_transmission_lgas <- function(client, state) mr_table(client, "/v1/transmission/lgas", list(state = state))
# Seasonal malaria chemoprevention planning by Nigeria's rainfall rule (docs/smc.md): every state, or with
# `state` (e.g. "KN") every LGA of that state; one row per area (eligible, margin, onset, first_cycle_month,
# cycles, children treated per cycle in the last campaign).
mr_smc <- function(client, state = NULL) {
  if (is.null(state)) return(mr_table(client, "/v1/transmission/smc/states"))
  mr_table(client, "/v1/transmission/smc/lgas", list(state = state))
}

mr_boundaries <- function(client, state, sf = FALSE) {
  text <- mr_text(client, "/v1/boundaries/lgas", list(state = state))
  if (!sf) return(jsonlite::fromJSON(text, simplifyVector = FALSE))
  if (!requireNamespace("sf", quietly = TRUE)) stop("sf = TRUE needs the sf package", call. = FALSE)
  sf::st_read(text, quiet = TRUE)
}

mr_download <- function(client, name, dest = ".", release_id = NULL) {
  rid <- if (is.null(release_id)) mr_downloads(client)$release_id else release_id
  sums <- strsplit(mr_text(client, paste0("/v1/downloads/", rid, "/SHA256SUMS")), "\n", fixed = TRUE)[[1]]
  sums <- sums[nzchar(sums)]
  expected <- stats::setNames(sub(" .*", "", sums), sub("^\\*", "", sub("^[0-9a-f]+ +", "", sums)))
  if (!(name %in% names(expected))) {
    stop("release ", rid, " has no bundle file ", name, call. = FALSE)
  }
  dir.create(dest, showWarnings = FALSE, recursive = TRUE)
  tmp <- tempfile(pattern = paste0(".", name, "."), tmpdir = dest)
  on.exit(unlink(tmp))
  resp <- mr_send(client, paste0("/v1/downloads/", rid, "/", name), path_out = tmp)
  if (httr2::resp_status(resp) >= 400) stop(mr_problem(resp))
  got <- sha256_file(tmp)
  if (!isTRUE(as.vector(got) == unname(expected[[name]]))) {
    stop("SHA-256 of ", name, " (release ", rid, ") is ", got, ", the release lists ", expected[[name]],
         "; the file was not kept", call. = FALSE)
  }
  target <- file.path(dest, name)
  file.rename(tmp, target)
  target
}

sha256_file <- function(path) {
  con <- file(path, open = "rb")
  on.exit(close(con))
  as.character(openssl::sha256(con))
}

mr_ratios_states <- function(client) mr_table(client, "/v1/transmission/ratios/states")
mr_ratios_lgas <- function(client, state) mr_table(client, "/v1/transmission/ratios/lgas", list(state = state))

# Project a count a programme has with the published season ratios: expected = cases x ratio, the
# 80 % range = cases x low .. cases x high. A month is "insufficient_skill" (no number) where the
# service's cross-validation found projected counts did not beat the count carried forward for areas
# of this season class. `bundle` (a bundle folder or its zip) works with no network and no client.
mr_project_counts <- function(client = NULL, area, month, cases, horizons = 4, bundle = NULL, state = NULL) {
  fail <- function(...) stop("mr_project_counts: ", ..., call. = FALSE)
  is_state <- is.character(area) && length(area) == 1 && grepl("^[A-Z]{2}$", area)
  is_lga <- is.character(area) && length(area) == 1 && grepl("^NG[0-9]{6}$", area)
  if (!is_state && !is_lga) fail("area must be a two-letter state code (e.g. \"KN\") or an LGA code (e.g. \"NG020001\")")
  year <- NA_integer_
  if (is.character(month) && length(month) == 1 && grepl("^[0-9]{4}-(0[1-9]|1[0-2])$", month)) {
    year <- as.integer(substr(month, 1, 4))
    cal <- as.integer(substr(month, 6, 7))
  } else if (is.numeric(month) && length(month) == 1 && !is.na(month) && month %in% 1:12) {
    cal <- as.integer(month)
  } else {
    fail("month must be \"YYYY-MM\" (the month of the count) or a calendar month 1 to 12")
  }
  if (!is.numeric(cases) || length(cases) != 1 || is.na(cases) || !is.finite(cases) || cases < 0) {
    fail("cases must be one count: a finite number of 0 or more")
  }
  if (!is.numeric(horizons) || length(horizons) != 1 || is.na(horizons) || !(horizons %in% 1:4)) {
    fail("horizons must be a whole number from 1 to 4")
  }
  key <- if (is_state) "state_code" else "lga_code"
  if (!is.null(bundle)) {
    name <- if (is_state) "season_ratio_state.csv" else "season_ratio_lga.csv"
    if (dir.exists(bundle)) {
      path <- file.path(bundle, name)
      if (!file.exists(path)) fail("the bundle folder has no ", name)
      text <- paste(readLines(path, encoding = "UTF-8", warn = FALSE), collapse = "\n")
    } else if (file.exists(bundle)) {
      inside <- utils::unzip(bundle, list = TRUE)$Name
      hit <- inside[basename(inside) == name]
      if (length(hit) == 0) fail(bundle, " has no ", name)
      con <- unz(bundle, hit[[1]], encoding = "UTF-8")
      text <- paste(readLines(con, warn = FALSE), collapse = "\n")
      close(con)
    } else {
      fail("bundle ", bundle, " is neither a bundle folder nor the bundle zip")
    }
    rows <- mr_read_csv(paste0(text, "\n"))
  } else {
    if (is.null(client)) fail("give a client (mr_client()) or a downloaded bundle")
    if (is_state) {
      rows <- mr_ratios_states(client)
    } else {
      if (is.null(state)) {
        all <- mr_risk_lgas_all(client)
        state <- all$state_code[all$lga_code == area]
        if (length(state) == 0) fail("LGA ", area, " is not in this release")
        state <- state[[1]]
      }
      rows <- mr_ratios_lgas(client, state)
    }
  }
  rows <- rows[rows[[key]] == area & rows$start_month == cal, , drop = FALSE]
  if (nrow(rows) == 0) fail("area ", area, " has no season ratios")
  h <- seq_len(horizons)
  r <- rows[match(h, rows$horizon), , drop = FALSE]
  ok <- !is.na(r$beats_persistence) & r$beats_persistence & !is.na(r$low) & !is.na(r$high)
  mon <- (cal - 1 + h) %% 12 + 1
  period <- if (is.na(year)) NA_character_ else sprintf("%04d-%02d", year + (cal - 1 + h) %/% 12, mon)
  data.frame(
    area = area, horizon = h, period = period, month = mon,
    status = ifelse(ok, "ok", "insufficient_skill"),
    expected = ifelse(ok, round(cases * r$ratio, 1), NA_real_),
    low = ifelse(ok, round(cases * r$low, 1), NA_real_),
    high = ifelse(ok, round(cases * r$high, 1), NA_real_),
    ratio = r$ratio, ratio_low = r$low, ratio_high = r$high,
    beats_persistence = r$beats_persistence, season_class = r$season_class,
    stringsAsFactors = FALSE
  )
}

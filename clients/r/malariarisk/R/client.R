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

# Cases are whole: half up, floor(x + 0.5) (x >= 0): the one rule of the map's form, this client and the
# Python client (tests/clients/test_rounding.py compares the three on a grid).
mr_whole_cases <- function(x) floor(x + 0.5)

# Project a count a programme has with the published season ratios: expected = cases x ratio, the
# 80 % range = cases x low .. cases x high, the quantiles q10..q90 likewise, in whole cases. A month is
# "insufficient_skill" (no number) where the service's cross-validation found projected counts did not
# beat the count carried forward for areas of this season class; "persistence" where a weak season
# carries the count forward. `cases` is one count or the last few months' counts (oldest first).
# `bundle` (a bundle folder or its zip) works with no network and no client. `dhis2` (a DHIS2 analytics
# export, JSON or CSV) projects every org unit it can match to a code.
mr_project_counts <- function(client = NULL, area = NULL, month = NULL, cases = NULL, horizons = 4, bundle = NULL,
                              state = NULL, dhis2 = NULL) {
  fail <- function(...) stop("mr_project_counts: ", ..., call. = FALSE)
  if (!is.numeric(horizons) || length(horizons) != 1 || is.na(horizons) || !(horizons %in% 1:4)) {
    fail("horizons must be a whole number from 1 to 4")
  }
  if (!is.null(dhis2)) return(mr_project_export(client, bundle, dhis2, month, horizons))
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
  if (!is.numeric(cases) || length(cases) < 1 || anyNA(cases) || !all(is.finite(cases)) || any(cases < 0)) {
    fail("cases must be a count (or the last few months' counts): finite numbers of 0 or more")
  }
  key <- if (is_state) "state_code" else "lga_code"
  if (!is.null(bundle)) {
    rows <- mr_bundle_table(bundle, if (is_state) "season_ratio_state.csv" else "season_ratio_lga.csv", fail)
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
  rows <- rows[rows[[key]] == area, , drop = FALSE]
  if (nrow(rows) == 0 || !any(rows$start_month == cal)) fail("area ", area, " has no season ratios")
  mr_projection(rows, area, cal, year, cases, horizons)
}

mr_bundle_table <- function(bundle, name, fail) {
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
  mr_read_csv(paste0(text, "\n"))
}

# The projection from one area's ratio records (every start month: those of `cal` are used, and with
# several counts the earlier months' ratios for a published k-month base, as the Python client).
mr_projection <- function(rows, area, cal, year, cases, horizons) {
  h <- seq_len(horizons)
  r <- rows[rows$start_month == cal, , drop = FALSE]
  r <- r[match(h, r$horizon), , drop = FALSE]
  col <- function(name, default = NA) if (name %in% names(r)) r[[name]] else rep(default, nrow(r))
  num <- function(name) suppressWarnings(as.numeric(col(name)))
  persistence <- !is.na(col("forecast")) & col("forecast") == "persistence"
  bp <- as.logical(r$beats_persistence)
  ok <- ((!is.na(bp) & bp) | persistence) & !is.na(r$low) & !is.na(r$high)
  back <- function(j) {
    x <- rows$ratio[rows$start_month == ((cal - 1 - j) %% 12) + 1 & rows$horizon == j]
    if (length(x)) as.numeric(x[[1]]) else NA_real_
  }
  kk <- suppressWarnings(as.integer(col("base_months", 1L)))
  kk[is.na(kk)] <- 1L
  n <- length(cases)
  base <- rep(cases[[n]], length(h))
  used <- rep(1L, length(h))
  for (i in seq_along(h)) {  # at most four horizons
    k <- kk[[i]]
    if (k < 2 || n < k) next
    b <- vapply(seq_len(k - 1), back, numeric(1))
    if (all(cases[(n - k + 1):n] > 0) && all(!is.na(b) & b > 0)) {
      base[[i]] <- exp(sum(c(log(cases[[n]]), log(cases[n - seq_len(k - 1)] * b))) / k)  # b = I(m)/I(m-j)
      used[[i]] <- k
    }
  }
  mon <- (cal - 1 + h) %% 12 + 1
  period <- if (is.na(year)) NA_character_ else sprintf("%04d-%02d", year + (cal - 1 + h) %/% 12, mon)
  whole <- function(x) ifelse(ok & !is.na(x), mr_whole_cases(base * x), NA_real_)
  data.frame(
    area = area, horizon = h, period = period, month = mon,
    status = ifelse(ok, ifelse(persistence, "persistence", "ok"), "insufficient_skill"),
    expected = whole(r$ratio), low = whole(r$low), high = whole(r$high),
    q10 = whole(num("q10")), q25 = whole(num("q25")), q50 = whole(num("q50")), q75 = whole(num("q75")),
    q90 = whole(num("q90")),
    ratio = r$ratio, ratio_low = r$low, ratio_high = r$high,
    beats_persistence = r$beats_persistence, season_class = r$season_class, base_months = used,
    stringsAsFactors = FALSE
  )
}

# --- DHIS2 analytics exports (as the Python client's _dhis2.py) ------------------------------------

mr_normalise <- function(x) {
  x <- iconv(x, "UTF-8", "ASCII//TRANSLIT", sub = "")
  gsub("[^a-z0-9]+", "", tolower(x))
}

mr_stem <- function(x) {
  key <- mr_normalise(x)
  out <- sub("(state|lga|localgovernmentarea|localgovernment)$", "", key)
  ifelse(nchar(out) > 0, out, key)
}

# difflib's SequenceMatcher(None, a, b).ratio() (no junk): the API's closeness of names.
mr_seq_ratio <- function(a, b) {
  A <- strsplit(a, "", fixed = TRUE)[[1]]
  B <- strsplit(b, "", fixed = TRUE)[[1]]
  matched <- function(alo, ahi, blo, bhi) {
    if (alo > ahi || blo > bhi) return(0)
    best <- 0; bi <- alo; bj <- blo
    for (i in alo:ahi) for (j in blo:bhi) {
      k <- 0
      while (i + k <= ahi && j + k <= bhi && A[[i + k]] == B[[j + k]]) k <- k + 1
      if (k > best) { best <- k; bi <- i; bj <- j }
    }
    if (best == 0) return(0)
    best + matched(alo, bi - 1, blo, bj - 1) + matched(bi + best, ahi, bj + best, bhi)
  }
  if (length(A) + length(B) == 0) return(1)
  2 * matched(1, length(A), 1, length(B)) / (length(A) + length(B))
}

# difflib.get_close_matches(word, pool, n, cutoff): best first, ties by the candidate, larger first.
mr_close_matches <- function(word, pool, n = 4, cutoff = 0.8) {
  lw <- nchar(word)
  pool <- pool[2 * pmin(nchar(pool), lw) / (nchar(pool) + lw) >= cutoff]
  if (!length(pool)) return(character(0))
  score <- vapply(pool, function(x) mr_seq_ratio(x, word), numeric(1))
  keep <- score >= cutoff
  pool <- pool[keep]; score <- score[keep]
  if (!length(pool)) return(character(0))
  o <- order(-score, -rank(pool, ties.method = "first"))
  head(pool[o], n)
}

mr_dhis2_period <- function(x) {
  x <- trimws(as.character(x))
  ok <- grepl("^[0-9]{4}(0[1-9]|1[0-2])$", x)
  ifelse(ok, paste0(substr(x, 1, 4), "-", substr(x, 5, 6)), NA_character_)
}

mr_dhis2_keep <- function(data) is.na(data) | grepl("confirmed uncomplicated malaria", tolower(gsub("\\s+", " ", data)))

# A DHIS2 export of "Confirmed uncomplicated malaria" as data.frame(org_unit, period "YYYY-MM", cases):
# analytics JSON (headers, rows, metaData.items), or CSV long (data, period, org unit, value) or pivot
# (a column per period YYYYMM).
mr_read_dhis2 <- function(source) {
  fail <- function(...) stop("mr_project_counts: ", ..., call. = FALSE)
  text <- if (length(source) == 1 && !grepl("\n", source) && file.exists(source)) {
    paste(readLines(source, encoding = "UTF-8", warn = FALSE), collapse = "\n")
  } else paste(source, collapse = "\n")
  text <- sub("^\ufeff", "", text)
  value <- function(v) { x <- suppressWarnings(as.numeric(gsub(",", "", trimws(as.character(v))))); ifelse(!is.na(x) & x >= 0, x, NA_real_) }
  if (grepl("^\\s*\\{", text)) {
    doc <- jsonlite::fromJSON(text, simplifyVector = FALSE)
    heads <- vapply(doc$headers, function(h) h$name, character(1))
    idx <- match(c("dx", "pe", "ou", "value"), heads)
    if (anyNA(idx)) fail("the DHIS2 JSON lacks a header; it needs dx, pe, ou and value")
    items <- doc$metaData$items
    name_of <- function(id) if (!is.null(items[[id]]$name)) items[[id]]$name else id
    m <- do.call(rbind, lapply(doc$rows, function(r) unlist(r)[idx]))
    if (is.null(m)) fail("the DHIS2 export has no rows")
    df <- data.frame(data = vapply(m[, 1], name_of, character(1)), period = mr_dhis2_period(m[, 2]),
                     org_unit = vapply(m[, 3], name_of, character(1)), cases = value(m[, 4]), stringsAsFactors = FALSE)
  } else {
    con <- textConnection(text, encoding = "UTF-8")
    on.exit(close(con))
    raw <- utils::read.csv(con, colClasses = "character", check.names = FALSE, na.strings = character(0))
    norm <- mr_normalise(names(raw))
    pick <- function(opts) { i <- which(norm %in% mr_normalise(opts)); if (length(i)) names(raw)[[i[[1]]]] else NA_character_ }
    ou <- pick(c("ou", "organisation unit", "organisationunit", "org unit", "orgunit", "organisation unit name",
                 "orgunitname", "organisationunitname", "lga", "organisation unit code", "orgunitcode"))
    if (is.na(ou)) fail("the DHIS2 CSV has no organisation unit column")
    pe <- pick(c("pe", "period", "periodid", "periodname"))
    val <- pick(c("value", "values"))
    dx <- pick(c("dx", "data", "data element", "dataelement", "indicator"))
    data <- if (is.na(dx)) rep(NA_character_, nrow(raw)) else raw[[dx]]
    if (!is.na(pe) && !is.na(val)) {
      df <- data.frame(data = data, period = mr_dhis2_period(raw[[pe]]), org_unit = trimws(raw[[ou]]),
                       cases = value(raw[[val]]), stringsAsFactors = FALSE)
    } else {
      pcols <- names(raw)[!is.na(mr_dhis2_period(names(raw)))]
      df <- do.call(rbind, lapply(pcols, function(p) data.frame(
        data = data, period = mr_dhis2_period(p), org_unit = trimws(raw[[ou]]), cases = value(raw[[p]]),
        stringsAsFactors = FALSE)))
    }
  }
  df <- df[!is.na(df$period) & !is.na(df$cases) & mr_dhis2_keep(df$data), c("org_unit", "period", "cases")]
  if (is.null(df) || nrow(df) == 0) fail("the DHIS2 export has no monthly values of \"Confirmed uncomplicated malaria\" (periods YYYYMM)")
  rownames(df) <- NULL
  df
}

# Org units to codes by the rule of the API's suggestions (see the Python client's _dhis2.py):
# data.frame(org_unit, code, match, suggestions "code;code").
mr_match_org_units <- function(org_units, lgas, states) {
  lgas <- lgas[order(lgas$lga_code), , drop = FALSE]
  keys <- mr_normalise(lgas$lga)
  state_keys <- stats::setNames(names(states), mr_normalise(states))
  one <- function(raw) {
    up <- toupper(trimws(raw))
    if (up %in% lgas$lga_code || up %in% names(states)) return(c(up, "code", ""))
    if (mr_stem(raw) %in% names(state_keys)) return(c(state_keys[[mr_stem(raw)]], "name", ""))
    st <- NA_character_
    name <- trimws(raw)
    m <- regmatches(name, regexec("^([A-Za-z]{2})\\s+(.+)$", name))[[1]]
    if (length(m) == 3 && toupper(m[[2]]) %in% names(states)) { st <- toupper(m[[2]]); name <- m[[3]] }
    key <- mr_stem(name)
    inst <- if (is.na(st)) rep(TRUE, nrow(lgas)) else lgas$state_code == st
    exact <- which(keys == key & inst)
    sug <- function(i) paste(head(lgas$lga_code[i], 8), collapse = ";")
    if (length(exact) == 1) return(c(lgas$lga_code[[exact]], "name", sug(exact)))
    if (length(exact) > 1) return(c(NA_character_, "ambiguous", sug(exact)))
    close <- mr_close_matches(key, unique(keys[inst]))
    hits <- unlist(lapply(close, function(k) which(keys == k & inst)))
    if (length(hits) == 1) return(c(lgas$lga_code[[hits]], "close", sug(hits)))
    c(NA_character_, if (length(hits)) "ambiguous" else "unmatched", sug(hits))
  }
  u <- unique(org_units)
  res <- do.call(rbind, lapply(u, one))
  data.frame(org_unit = u, code = res[, 1], match = res[, 2], suggestions = res[, 3], stringsAsFactors = FALSE)
}

mr_project_export <- function(client, bundle, dhis2, month, horizons) {
  fail <- function(...) stop("mr_project_counts: ", ..., call. = FALSE)
  rows <- mr_read_dhis2(dhis2)
  if (!is.null(bundle)) {
    lgas <- mr_bundle_table(bundle, "gazetteer.csv", fail)
    st <- mr_bundle_table(bundle, "season_ratio_state.csv", fail)
    lr <- mr_bundle_table(bundle, "season_ratio_lga.csv", fail)
    ratios_of <- function(code) if (grepl("^[A-Z]{2}$", code)) st[st$state_code == code, , drop = FALSE] else lr[lr$lga_code == code, , drop = FALSE]
  } else {
    if (is.null(client)) fail("give a client (mr_client()) or a downloaded bundle")
    lgas <- mr_risk_lgas_all(client)
    st <- mr_ratios_states(client)
    cache <- list()
    ratios_of <- function(code) {
      if (grepl("^[A-Z]{2}$", code)) return(st[st$state_code == code, , drop = FALSE])
      s <- lgas$state_code[lgas$lga_code == code][[1]]
      if (is.null(cache[[s]])) cache[[s]] <<- mr_ratios_lgas(client, s)
      x <- cache[[s]]
      x[x$lga_code == code, , drop = FALSE]
    }
  }
  states <- unique(st[, c("state_code", "state")])
  states <- stats::setNames(states$state, states$state_code)
  matches <- mr_match_org_units(rows$org_unit, lgas, states)
  rows$code <- matches$code[match(rows$org_unit, matches$org_unit)]
  rows <- rows[!is.na(rows$code), , drop = FALSE]
  out <- list()
  for (code in sort(unique(rows$code))) {  # one projection per matched area
    mine <- stats::aggregate(cases ~ period, data = rows[rows$code == code, , drop = FALSE], FUN = sum)
    end <- if (is.null(month)) max(mine$period) else month
    if (!(end %in% mine$period)) next
    t <- as.integer(substr(end, 1, 4)) * 12 + as.integer(substr(end, 6, 7)) - 1 - 0:2
    per <- sprintf("%04d-%02d", t %/% 12, t %% 12 + 1)
    v <- mine$cases[match(per, mine$period)]
    v <- rev(v[seq_len(if (anyNA(v)) which(is.na(v))[[1]] - 1 else 3)])
    recs <- ratios_of(code)
    if (nrow(recs) == 0) next
    out[[code]] <- mr_projection(recs, code, as.integer(substr(end, 6, 7)), as.integer(substr(end, 1, 4)), v, horizons)
  }
  list(org_units = matches, projections = if (length(out)) do.call(rbind, out) else NULL)
}

/*
 * errorkb search: paste an SGLang error (message, log line or whole traceback) and get the
 * error pages it most likely is. A port of generator/search.py, step for step, reading the
 * same index files under search/ and loading only the pieces a paste needs: the token shards
 * of its words, the file shard of its traceback frame, and the entry shards of the results.
 *
 * In a browser it attaches to #search-form, #search-input and #search-results, and to ?q= in
 * the address; in Node it exports the matcher for tests.
 */
(function () {
  "use strict";

  var SPACE = "[ \\t\\n\\r\\f\\v\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff]";
  var SPACES = new RegExp(SPACE + "+", "g");
  var TRIM = new RegExp("^" + SPACE + "+|" + SPACE + "+$", "g");
  var TOKEN = /[a-z0-9]+/g;
  var EXCEPTION = "((?:[A-Za-z_][A-Za-z0-9_.]*)?(?:Error|Exception|Warning|Exit|Interrupt|Failure|Iteration))";
  var EXCEPTION_LINE = new RegExp("^[ \\t]*" + EXCEPTION + "(?::[ \\t]?(.*))?$");
  var EXCEPTION_INSIDE = new RegExp("(?:^|[ \\t\\]])" + EXCEPTION + ":[ \\t](.*)$");
  var FRAME_LINE = /^[ \t]*File "([^"]+)", line (\d+)(?:, in (.+?))?[ \t]*$/;
  var WARNING_LINE = /^(.*?\.py):(\d+): ([A-Za-z_][A-Za-z0-9_]*Warning): (.*)$/;
  var WORD_CHAR = /[A-Za-z0-9_]/;
  var CARETS = /^[ \t]*[\^~]+[ \t]*$/;
  // The index format this code reads (search/manifest.json "version"), as in search.py.
  var INDEX_VERSION = 3;
  // A pasted log can be long; the error is at its end, and its message has fewer words than this.
  var MAX_PASTE = 20000;
  var MAX_WORDS = 80;
  var encoder = typeof TextEncoder === "function" ? new TextEncoder() : null;

  // Text primitives, as in search.py.

  function squash(text) {
    return text.replace(SPACES, "");
  }

  function trim(text) {
    return text.replace(TRIM, "");
  }

  function tokens(text) {
    var found = text.toLowerCase().match(TOKEN) || [];
    return found.filter(function (t) {
      return t.length > 1 && !/^[0-9]+$/.test(t);
    });
  }

  function unique(items) {
    var seen = new Set();
    return items.filter(function (item) {
      if (seen.has(item)) return false;
      seen.add(item);
      return true;
    });
  }

  function bucket(key, buckets) {
    var bytes = encoder.encode(key);
    var value = 0x811c9dc5;
    for (var i = 0; i < bytes.length; i++) {
      value = Math.imul(value ^ bytes[i], 0x01000193) >>> 0;
    }
    return value % buckets;
  }

  function pathParts(path) {
    return path.replace(/\\/g, "/").split("/").filter(function (p) {
      return p;
    });
  }

  function pathKey(path) {
    return pathParts(path).slice(-2).join("/");
  }

  function pathMatches(framePath, sitePath) {
    var siteParts = sitePath.split("/");
    var frameParts = pathParts(framePath);
    var need = Math.max(1, Math.min(3, siteParts.length - 1));
    if (frameParts.length < need) return false;
    var a = frameParts.slice(-need), b = siteParts.slice(-need);
    return a.length === b.length && a.every(function (part, i) {
      return part === b[i];
    });
  }

  function lastComponent(name) {
    return name.slice(name.lastIndexOf(".") + 1);
  }

  // Reading a paste.

  function parsePaste(text) {
    var lines = text.replace(/\r\n/g, "\n").replace(/\r/g, "\n").split("\n");
    var frames = [];
    var index = 0;
    var lastFrameEnd = -1;
    while (index < lines.length) {
      var found = FRAME_LINE.exec(lines[index]);
      if (found) {
        var source = "";
        var end = index;
        if (index + 1 < lines.length && !FRAME_LINE.test(lines[index + 1])) {
          var candidate = lines[index + 1];
          if ((candidate[0] === " " || candidate[0] === "\t") && trim(candidate) && !CARETS.test(candidate)) {
            source = trim(candidate);
            end = index + 1;
          }
        }
        while (end + 1 < lines.length && CARETS.test(lines[end + 1])) end += 1;
        frames.push({ path: found[1], line: parseInt(found[2], 10), function: found[3] || "", source: source });
        lastFrameEnd = end;
        index = end + 1;
        continue;
      }
      index += 1;
    }
    var frame = null;
    for (var f = frames.length - 1; f >= 0; f--) {
      if (("/" + frames[f].path.replace(/\\/g, "/")).indexOf("/sglang/") >= 0) {
        frame = frames[f];
        break;
      }
    }
    var rest = frames.length ? lines.slice(lastFrameEnd + 1) : lines;
    var n, match;
    for (n = 0; n < rest.length; n++) {
      match = WARNING_LINE.exec(trim(rest[n]));
      if (match) {
        var warningSource = n + 1 < rest.length ? trim(rest[n + 1]) : "";
        var warningFrame = { path: match[1], line: parseInt(match[2], 10), function: "", source: warningSource };
        return { message: trim(match[4]), exception: match[3], frame: frame || warningFrame, whole: "" };
      }
    }
    for (n = 0; n < rest.length; n++) {
      match = EXCEPTION_LINE.exec(rest[n]);
      if (match) {
        var message = trim([match[2] || ""].concat(rest.slice(n + 1)).join("\n"));
        return { message: message, exception: lastComponent(match[1]), frame: frame, whole: "" };
      }
    }
    var whole = trim(rest.join("\n"));
    for (n = 0; n < rest.length; n++) {
      match = EXCEPTION_INSIDE.exec(rest[n]);
      if (match) {
        var inside = trim([match[2]].concat(rest.slice(n + 1)).join("\n"));
        return { message: inside, exception: lastComponent(match[1]), frame: frame, whole: whole };
      }
    }
    return { message: whole, exception: null, frame: frame, whole: "" };
  }

  function messagesOf(paste) {
    var message = squash(paste.message);
    var forms = message ? [message] : [];
    var first = message[0], last = message[message.length - 1];
    if (paste.exception === "KeyError" && message.length >= 2 && first === last && (first === "'" || first === '"')) {
      forms.push(message.slice(1, -1));
    }
    if (paste.whole) forms.push(squash(paste.whole));
    return forms;
  }

  function queryTokens(paste) {
    var text = paste.message;
    if (paste.exception) text += " " + paste.exception;
    if (paste.frame) text += " " + paste.frame.function + " " + paste.frame.source;
    return unique(tokens(text)).slice(0, MAX_WORDS);
  }

  // Matching.

  function templateMatches(message, segments, starts, ends) {
    var count = segments.length;
    if (starts && ends && count === 1) return message === segments[0];
    var position = 0, end = message.length, first = 0, stop = count;
    if (starts) {
      if (!message.startsWith(segments[0])) return false;
      position = segments[0].length;
      first = 1;
    }
    if (ends) {
      var lastSegment = segments[count - 1];
      if (!message.endsWith(lastSegment) || message.length - lastSegment.length < position) return false;
      end = message.length - lastSegment.length;
      stop = count - 1;
    }
    for (var i = first; i < stop; i++) {
      var at = message.indexOf(segments[i], position);
      if (at < 0 || at + segments[i].length > end) return false;
      position = at + segments[i].length;
    }
    return true;
  }

  function templateScore(forms, segments, starts, ends, manifest) {
    var literal = 0;
    segments.forEach(function (s) {
      literal += s.length;
    });
    var best = 0;
    forms.forEach(function (form) {
      var weight;
      if (templateMatches(form, segments, starts, ends)) weight = 1;
      else if ((starts || ends) && templateMatches(form, segments, false, false)) weight = 0.9;
      else return;
      var share = literal / Math.max(form.length, 1);
      var confident =
        share >= manifest.confident_share ||
        literal >= manifest.confident_literal ||
        (weight === 1 && starts && segments[0].length >= manifest.confident_start);
      best = Math.max(best, (confident ? 1 : 0) + weight * share);
    });
    return best;
  }

  function statementMatches(source, signature) {
    if (source === signature) return true;
    if (source.startsWith(signature)) {
      var following = source[signature.length];
      if (signature.startsWith("assert")) return following === ",";
      return !WORD_CHAR.test(following);
    }
    return signature.startsWith(source) && source.length >= 10;
  }

  function frameScore(frame, fn, line, endLine, signature) {
    var score = 0.1;
    if (fn === frame.function || (fn === "" && frame.function === "<module>")) score += 0.2;
    var source = squash(frame.source);
    if (source && signature && statementMatches(source, signature)) score += 0.8;
    if (line <= frame.line && frame.line <= endLine) score += 0.8;
    return score;
  }

  // Error ids are ASCII, so this orders them as Python's sorted() does.
  function compareIds(a, b) {
    return a < b ? -1 : a > b ? 1 : 0;
  }

  function round6(value) {
    return Math.round(value * 1e6) / 1e6;
  }

  /*
   * The errors a paste most likely is, best first: [{id, title, message, exception, kind,
   * where, score}]. `index.piece(name)` returns a promise of one index file's JSON. `early`, if
   * given, is called once the word and template shards are in, with the results whose titles
   * those shards already hold, before the entry shards arrive.
   */
  async function lookup(text, index, limit, early) {
    limit = limit || 10;
    var paste = parsePaste(text.slice(-MAX_PASTE));
    var manifest = await index.piece("manifest.json");
    if (manifest.version !== INDEX_VERSION) throw new Error("search index version " + manifest.version + ", expected " + INDEX_VERSION);
    var words = queryTokens(paste);
    var forms = messagesOf(paste);
    var names = unique(words.map(function (w) {
      return String(bucket(w, manifest.token_buckets));
    }).concat(["none"]));
    var framePiece = paste.frame ? "f/" + bucket(pathKey(paste.frame.path), manifest.file_buckets) + ".json" : null;
    var loading = names.map(function (name) {
      return index.piece("t/" + name + ".json");
    });
    var fileShardLoading = framePiece ? index.piece(framePiece) : Promise.resolve(null);
    var shards = await Promise.all(loading);
    var byName = new Map();
    names.forEach(function (name, i) {
      byName.set(name, shards[i]);
    });

    var evidence = new Map(); // error id: [template, frame, word]
    var known = new Map(); // error id: a result from a template record
    function slotOf(id) {
      if (!evidence.has(id)) evidence.set(id, [0, 0, 0]);
      return evidence.get(id);
    }

    shards.forEach(function (shard) {
      shard.templates.forEach(function (record) {
        var id = record[0], exception = record[1], segments = record[3];
        var value = templateScore(forms, segments, !!record[4], !!record[5], manifest);
        if (value > 0) {
          if (paste.exception && exception === paste.exception) value += manifest.named_exception;
          var slot = slotOf(id);
          slot[0] = Math.max(slot[0], value);
          known.set(id, { id: id, title: record[2], message: record[2], exception: exception, kind: null, where: null });
        }
      });
    });

    var totals = new Map(), matched = new Map();
    var knownWeight = 0;
    var count = manifest.entries;
    words.forEach(function (word) {
      var postings = byName.get(String(bucket(word, manifest.token_buckets))).postings;
      var flat = Object.prototype.hasOwnProperty.call(postings, word) ? postings[word] : null;
      if (!flat || !flat.length) return;
      var frequency = Math.floor(flat.length / 2);
      var idf = Math.log(1 + (count - frequency + 0.5) / (frequency + 0.5));
      knownWeight += idf;
      for (var p = 0; p < flat.length; p += 2) {
        var id = flat[p];
        totals.set(id, (totals.get(id) || 0) + (idf * flat[p + 1]) / 100);
        matched.set(id, (matched.get(id) || 0) + 1);
      }
    });
    var ranked = Array.from(totals.entries()).sort(function (a, b) {
      return b[1] - a[1] || compareIds(a[0], b[0]);
    });
    ranked.slice(0, manifest.word_candidates).forEach(function (item) {
      if (matched.get(item[0]) >= 2) slotOf(item[0]);
    });

    var fileShard = await fileShardLoading;
    if (fileShard) {
      Object.keys(fileShard).sort().forEach(function (sitePath) {
        if (!pathMatches(paste.frame.path, sitePath)) return;
        fileShard[sitePath].forEach(function (site) {
          var value = frameScore(paste.frame, site[1], site[2], site[3], site[4]);
          if (value >= 0.9 || evidence.has(site[0])) {
            var slot = slotOf(site[0]);
            slot[1] = Math.max(slot[1], value);
          }
        });
      });
    }

    var results = [];
    evidence.forEach(function (slot, id) {
      var word = knownWeight ? Math.min(1, (totals.get(id) || 0) / knownWeight) : 0;
      var score = round6(slot[0] + slot[1] + word);
      if (score >= manifest.min_score) results.push([score, id]);
    });
    results.sort(function (a, b) {
      return b[0] - a[0] || compareIds(a[1], b[1]);
    });
    results = results.slice(0, limit);

    if (early) {
      var ready = [];
      for (var r = 0; r < results.length && known.has(results[r][1]); r++) {
        ready.push(Object.assign({}, known.get(results[r][1]), { score: results[r][0] }));
      }
      if (ready.length) early(ready);
    }

    var entryShards = await Promise.all(results.map(function (item) {
      return index.piece("e/" + bucket(item[1], manifest.entry_buckets) + ".json");
    }));
    return results.map(function (item, i) {
      var row = entryShards[i][item[1]];
      return {
        id: item[1],
        title: row[2],
        message: row[3] ? row[2] : null,
        exception: row[0],
        kind: row[1],
        where: row[4],
        score: item[0],
      };
    });
  }

  /* An index read through `read(path)` (a promise of the JSON at search/<path>), each piece once. */
  function openIndex(read) {
    var pieces = new Map();
    return {
      piece: function (name) {
        if (!pieces.has(name)) {
          var loading = read(name);
          pieces.set(name, loading);
          loading.catch(function () {
            pieces.delete(name);
          });
        }
        return pieces.get(name);
      },
    };
  }

  var api = {
    squash: squash,
    tokens: tokens,
    bucket: bucket,
    parsePaste: parsePaste,
    templateMatches: templateMatches,
    lookup: lookup,
    openIndex: openIndex,
  };

  if (typeof module === "object" && module.exports) module.exports = api;
  if (typeof document === "undefined") return;

  // The page: the form, the results region, ?q= in the address.

  function attach() {
    var form = document.getElementById("search-form");
    var input = document.getElementById("search-input");
    var output = document.getElementById("search-results");
    if (!form || !input || !output) return;
    var root = document.documentElement.getAttribute("data-root") || "";
    var index = openIndex(function (name) {
      return fetch(root + "search/" + name).then(function (response) {
        if (!response.ok) throw new Error("search/" + name + ": HTTP " + response.status);
        return response.json();
      });
    });
    var current = 0;

    if (!input.getAttribute("placeholder")) {
      input.setAttribute("placeholder", "Paste an error message or a whole traceback; Ctrl+Enter searches");
    }
    input.setAttribute("aria-describedby", "search-results");

    function say(text) {
      var p = document.createElement("p");
      p.textContent = text;
      output.replaceChildren(p);
    }

    function render(results, searching) {
      var heading = document.createElement("p");
      heading.textContent = results.length === 1 ? "1 matching error" : results.length + " matching errors";
      if (searching) heading.textContent += " (still searching…)";
      var list = document.createElement("ol");
      list.className = "search-results";
      results.forEach(function (result) {
        var item = document.createElement("li");
        var link = document.createElement("a");
        link.href = root + "errors/" + result.id + "/";
        link.textContent = result.title;
        var about = document.createElement("span");
        about.className = "search-result-meta";
        about.textContent =
          " " + (result.exception || "unknown exception") + (result.where ? " · " + result.where : "");
        item.append(link, about);
        list.append(item);
      });
      output.replaceChildren(heading, list);
    }

    async function search(text) {
      var run = ++current;
      if (!trim(text)) {
        say("Paste an error message or a traceback to search.");
        return;
      }
      say("Searching…");
      try {
        var results = await lookup(text, index, 10, function (ready) {
          if (run === current) render(ready, true);
        });
        if (run !== current) return;
        if (results.length) render(results, false);
        else say("No error matches this text. Try the exact message as printed, or its first line.");
      } catch (error) {
        if (run === current) say("Search is unavailable: " + error.message);
      }
    }

    function submit() {
      var text = input.value;
      var url = new URL(window.location.href);
      url.searchParams.set("q", text);
      window.history.replaceState(null, "", url);
      search(text);
    }

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      submit();
    });
    input.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        submit();
      }
    });
    var query = new URLSearchParams(window.location.search).get("q");
    if (query) {
      input.value = query;
      search(query);
    } else {
      index.piece("manifest.json").catch(function () {});
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", attach);
  else attach();
})();

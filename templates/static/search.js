/*
 * errorkb search: paste an SGLang error (message, log line or whole traceback) and get the
 * error pages it most likely is. A port of generator/search.py, step for step, reading the
 * same index files under search/ and loading only the pieces a paste needs: the token shards
 * of its words, the file and function shards of its traceback frame, and the entry shards of
 * the results.
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
  // A line that names the exception after other text, or by its own __str__: as in search.py.
  var NAMED_INSIDE = new RegExp("(?:^|[ \\t\\]>(])" + EXCEPTION + "(?:\\([^()]*\\))?:[ \\t](.*)$");
  var REPR_SOURCE = "(?:^|[^A-Za-z0-9_.])" + EXCEPTION + "\\((['\"])((?:\\\\.|(?!\\2)[^\\\\])*)(?:\\2\\)|$)";
  var REPR = new RegExp(REPR_SOURCE, "g");
  var REPR_ONE = new RegExp(REPR_SOURCE);
  var BODY_FIELD = /(["'])(?:message|detail|msg)\1[ \t]*:[ \t]*(["'])((?:\\.|(?!\2)[^\\])*)(?:\2|$)/g;
  // A message an issue title quotes, long enough to be an error's words, not a value; a path
  // a title puts after a message.
  var QUOTED = /["\u201c`]([^"\u201d`]{20,})["\u201d`]/g;
  var PATH_WORD = /[ \t]+(?:[A-Za-z0-9_.~-]*\/)+[A-Za-z0-9_.-]+/g;
  var AT_LINE = 0.05; // search.py's AT_LINE
  var HTTP_WRAPPER = /(?:^|[ \t:])(?:Bad Request|Internal Server Error|Unprocessable Entity|Service Unavailable|HTTP(?:\/[0-9.]+)?[ \t]?[0-9]{3}(?:[ \t][A-Z][a-z]+)*|Error code:[ \t]?[0-9]{3})[ \t]*[:-][ \t]*/;
  var ESCAPE = /\\(u[0-9a-fA-F]{4}|[^u])/g;
  var ESCAPES = { n: "\n", t: "\t", r: "\r", b: "\b", f: "\f" };
  var ERRORISH = /error|fail|exception|invalid|cannot|can't|unable|unsupported|not supported|out of memory|abort|mismatch|not found|must(?![A-Za-z0-9_])|timed out|killed|leak/i;
  var LOG_PREFIX = new RegExp(
    "^(?:[A-Za-z0-9_.-]+ +\\| ?" +
      "|\\([A-Za-z0-9_]* ?pid=[0-9]+[^)]*\\) ?" +
      "|\\[[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][^\\]]*\\] ?" +
      "|\\[(?:rank|TP|DP|PP|EP)[0-9]+[^\\]]*\\]:? ?" +
      "|\\[[A-Za-z_]+=[^\\]]*\\] ?" +
      "|[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?Z? +(?:[A-Za-z_][A-Za-z0-9_.]* +[0-9]+ +)?" +
      "|(?:ERROR|WARNING|WARN|INFO|DEBUG|CRITICAL|FATAL)(?::? +|:$))"
  );
  var FRAME_LINE = /^[ \t]*File "([^"]+)", line (\d+)(?:, in (.+?))?[ \t]*$/;
  var WARNING_LINE = /^(.*?\.py):(\d+): ([A-Za-z_][A-Za-z0-9_]*Warning): (.*)$/;
  var WORD_CHAR = /[A-Za-z0-9_]/;
  var LEADING_NAME = /^[A-Za-z0-9_.]*/;
  var CARETS = /^[ \t]*[\^~]+[ \t]*$/;
  var RAISING = /^(?:raise|assert)(?![A-Za-z0-9_])/;
  var ASSERT = /^assert(?![A-Za-z0-9_])/;
  // The index format this code reads (search/manifest.json "version"), as in search.py.
  var INDEX_VERSION = 6;
  // A pasted log can be long; the error is at its end, and its message has fewer words than this.
  var MAX_PASTE = 20000;
  var MAX_WORDS = 80;
  // A log is read from the lines that look most like an error, as in search.py.
  var LOG_LINES = 6;
  var LOG_WEIGHT = 0.9;
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

  // Where what is left of a path cut by an ellipsis starts; 0 if not cut (search.py).
  function cutAt(parts) {
    var cut = 0;
    parts.forEach(function (part, i) {
      if (part === "..." || part === "\u2026") cut = i + 1;
    });
    return cut;
  }

  function pathMatches(framePath, sitePath) {
    var siteParts = sitePath.split("/");
    var frameParts = pathParts(framePath);
    var need = Math.max(1, Math.min(3, siteParts.length - 1));
    var cut = cutAt(frameParts);
    if (cut) {
      frameParts = frameParts.slice(cut);
      if (frameParts.length < 2) return false;
      need = Math.min(need, frameParts.length);
    }
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

  function unprefixed(line) {
    for (var i = 0; i < 6; i++) {
      var found = LOG_PREFIX.exec(line);
      if (!found || !found[0]) return line;
      line = line.slice(found[0].length);
    }
    return line;
  }

  function className(printed) {
    var name = lastComponent(printed);
    return name === "Error" ? null : name;
  }

  function unescapeText(text) {
    return text.replace(ESCAPE, function (all, code) {
      if (code[0] === "u") return String.fromCharCode(parseInt(code.slice(1), 16));
      return Object.prototype.hasOwnProperty.call(ESCAPES, code) ? ESCAPES[code] : code;
    });
  }

  function errorLines(lines) {
    var ranked = [];
    lines.forEach(function (line, number) {
      var text = trim(line);
      if (!text || text.startsWith("Traceback (most recent call last)") || CARETS.test(line)) return;
      var rank = NAMED_INSIDE.test(text) || REPR_ONE.test(text) ? 2 : ERRORISH.test(text) ? 1 : 0;
      if (rank) ranked.push([rank, number, text]);
    });
    ranked.sort(function (a, b) {
      return b[0] - a[0] || b[1] - a[1];
    });
    return ranked.slice(0, LOG_LINES).map(function (item) {
      return item[2];
    });
  }

  function reading(text, exception, weight) {
    return { text: text, exception: exception, weight: weight };
  }

  function unwrapped(text, exception, weight) {
    text = trim(text);
    var readings = [];
    var found;
    REPR.lastIndex = 0;
    while ((found = REPR.exec(text))) {
      readings.push(reading(trim(unescapeText(found[3])), className(found[1]), weight));
    }
    BODY_FIELD.lastIndex = 0;
    while ((found = BODY_FIELD.exec(text))) {
      readings.push(reading(trim(unescapeText(found[3])), null, weight));
    }
    if (!readings.length) {
      var wrapped = HTTP_WRAPPER.exec(text);
      if (wrapped) readings.push(reading(trim(text.slice(wrapped.index + wrapped[0].length)), null, weight));
    }
    if (exception === null) {
      var named = NAMED_INSIDE.exec(text);
      if (named) readings.push(reading(trim(named[2]), className(named[1]), weight));
    }
    readings.push(reading(text, exception, weight));
    if (exception === null) {
      // A line that only mentions the error (an issue's title): what it quotes, and the line
      // without the paths around the message.
      var parts = [];
      QUOTED.lastIndex = 0;
      while ((found = QUOTED.exec(text))) parts.push(trim(found[1]));
      var bare = trim(text.replace(PATH_WORD, " "));
      if (bare !== text) parts.push(bare);
      parts.forEach(function (part) {
        if ((part.match(/\S+/g) || []).length >= 3) readings.push(reading(part, null, weight));
      });
    }
    return readings.filter(function (r) {
      return r.text || r.exception;
    });
  }

  function uniqueReadings(readings) {
    var seen = new Set();
    return readings.filter(function (r) {
      var key = JSON.stringify([r.text, r.exception, r.weight]);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  }

  // What identifies a bare AssertionError: the statement printed above it (search.py).
  function printedAssert(above, frames) {
    var lines = above.filter(function (line) {
      return trim(line) && !CARETS.test(line);
    });
    var source;
    if (lines.length) {
      var last = lines[lines.length - 1];
      source = last[0] === " " || last[0] === "\t" ? trim(last) : "";
    } else {
      source = frames.length ? frames[frames.length - 1].source : "";
    }
    return ASSERT.test(source) ? source : "";
  }

  function parsePaste(text) {
    var lines = text.replace(/\r\n/g, "\n").replace(/\r/g, "\n").split("\n").map(unprefixed);
    var frames = [];
    var index = 0;
    var firstFrame = -1, lastFrameEnd = -1;
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
        if (firstFrame < 0) firstFrame = index;
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
    // Else the last frame whose path was cut (".../x.py").
    for (f = frames.length - 1; f >= 0 && !frame; f--) {
      if (cutAt(pathParts(frames[f].path))) frame = frames[f];
    }
    var rest = frames.length ? lines.slice(lastFrameEnd + 1) : lines;
    var before = frames.length ? lines.slice(0, firstFrame) : [];
    var readings = [];
    var message = "", exception = null;
    var n, match, warned = false;
    for (n = 0; n < rest.length; n++) {
      match = WARNING_LINE.exec(trim(rest[n]));
      if (match) {
        var warningSource = n + 1 < rest.length ? trim(rest[n + 1]) : "";
        frame = frame || { path: match[1], line: parseInt(match[2], 10), function: "", source: warningSource };
        message = trim(match[4]);
        exception = match[3];
        warned = true;
        break;
      }
    }
    if (!warned) {
      for (n = 0; n < rest.length; n++) {
        match = EXCEPTION_LINE.exec(rest[n]);
        if (match) {
          message = trim([match[2] || ""].concat(rest.slice(n + 1)).join("\n"));
          exception = className(match[1]);
          if (!message && exception === "AssertionError") message = printedAssert(rest.slice(0, n), frames);
          break;
        }
      }
    }
    if (exception !== null) readings = readings.concat(unwrapped(message, exception, 1));
    errorLines(before.concat(rest)).forEach(function (line) {
      readings = readings.concat(unwrapped(line, null, exception === null ? 1 : LOG_WEIGHT));
    });
    readings = uniqueReadings(readings);
    var first;
    if (exception === null) {
      first = readings.find(function (r) {
        return r.text;
      });
      if (first) {
        message = first.text;
        exception = first.exception;
      } else {
        message = trim(rest.join("\n"));
        if (message) readings = readings.concat(unwrapped(message, null, 1));
      }
    } else if (!message) {
      first = readings.find(function (r) {
        return r.text && r.exception;
      });
      if (first) {
        message = first.text;
        exception = first.exception;
      }
    }
    return { message: message, exception: exception, frame: frame, readings: readings };
  }

  function formsOf(paste) {
    var readings = paste.readings.length ? paste.readings : [reading(paste.message, paste.exception, 1)];
    var forms = [];
    readings.forEach(function (r) {
      var text = squash(r.text);
      if (!text) return;
      forms.push([text, r.exception, r.weight]);
      var first = text[0], last = text[text.length - 1];
      if (r.exception === "KeyError" && text.length >= 2 && first === last && (first === "'" || first === '"')) {
        forms.push([text.slice(1, -1), r.exception, r.weight]);
      }
    });
    var seen = new Set();
    return forms.filter(function (form) {
      var key = JSON.stringify(form);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  }

  function exceptionsOf(paste) {
    var named = new Set();
    paste.readings.forEach(function (r) {
      if (r.exception) named.add(r.exception);
    });
    if (paste.exception) named.add(paste.exception);
    return named;
  }

  function queryTokens(paste) {
    var text = paste.message;
    if (paste.exception) text += " " + paste.exception;
    if (paste.frame) text += " " + paste.frame.function + " " + paste.frame.source;
    return unique(tokens(text)).slice(0, MAX_WORDS);
  }

  function shardTokens(paste, words) {
    var found = words.slice();
    paste.readings.forEach(function (r) {
      found = found.concat(tokens(r.text));
    });
    return unique(found).slice(0, MAX_WORDS);
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

  function templatePrefix(message, segments, starts) {
    if (!starts) return 0;
    var first = segments[0];
    if (message.length <= first.length) return first.startsWith(message) ? message.length : 0;
    if (!message.startsWith(first)) return 0;
    var pinned = first.length, position = first.length;
    for (var i = 1; i < segments.length; i++) {
      var segment = segments[i];
      var at = message.indexOf(segment, position);
      if (at >= 0) {
        pinned += segment.length;
        position = at + segment.length;
        continue;
      }
      for (var size = Math.min(segment.length - 1, message.length - position); size > 0; size--) {
        if (message.endsWith(segment.slice(0, size))) {
          pinned += size;
          break;
        }
      }
      break;
    }
    return pinned;
  }

  var CATCH_ALL = ["Exception", "BaseException"];

  // As search.py's same_class: the class named, a subclass of it, or (upstream's) one of its bases.
  function sameClass(named, raised, classes) {
    raised = raised.slice(raised.lastIndexOf(".") + 1);
    if (named === raised) return true;
    var ancestors = (classes && classes.ancestors) || {};
    var own = Object.prototype.hasOwnProperty.call(ancestors, raised) ? ancestors[raised] : [];
    if (own.indexOf(named) >= 0) return true;
    var theirs = Object.prototype.hasOwnProperty.call(ancestors, named) ? ancestors[named] : [];
    return CATCH_ALL.indexOf(raised) < 0 && ((classes && classes.defined) || []).indexOf(named) >= 0 && theirs.indexOf(raised) >= 0;
  }

  function templateScore(forms, segments, starts, ends, exception, manifest, classes) {
    var literal = 0;
    segments.forEach(function (s) {
      literal += s.length;
    });
    var best = 0, how = "", bestException = null;
    forms.forEach(function (item) {
      var form = item[0], formException = item[1], formWeight = item[2];
      var fits = formException !== null && exception !== null && sameClass(formException, exception, classes);
      var size = Math.max(form.length, 1);
      var kind = "message", weight, pinned;
      if (templateMatches(form, segments, starts, ends)) {
        weight = 1;
        pinned = literal;
      } else if ((starts || ends) && templateMatches(form, segments, false, false)) {
        weight = 0.9;
        pinned = literal;
      } else {
        pinned = templatePrefix(form, segments, starts);
        var wholeFirst = fits && form.startsWith(segments[0]);
        if (pinned < manifest.confident_start && !(wholeFirst && pinned >= manifest.short_start)) return;
        weight = manifest.partial;
        kind = "beginning";
      }
      var share = Math.min(1, pinned / size);
      var confident;
      if (kind === "beginning") {
        confident = pinned >= manifest.confident_literal || (pinned >= manifest.confident_start && share >= manifest.confident_share);
      } else {
        confident =
          share >= manifest.confident_share ||
          literal >= manifest.confident_literal ||
          (weight === 1 && starts && segments[0].length >= manifest.confident_start);
      }
      var value = ((confident ? 1 : 0) + weight * share) * formWeight;
      if (fits) value += manifest.named_exception;
      if (kind === "message" && !confident) kind = "";
      if (value > best) {
        best = value;
        how = kind;
        bestException = formException;
      }
    });
    return [best, how, bestException];
  }

  function statementMatches(source, signature) {
    if (source === signature) return true;
    if (source.startsWith(signature)) {
      var following = source[signature.length];
      if (signature.startsWith("assert")) return following === ",";
      return !WORD_CHAR.test(following);
    }
    var keyword = signature.startsWith("assert") ? 6 : 5;
    return signature.startsWith(source) && source.length >= keyword + 4;
  }

  function frameScore(frame, fn, line, endLine, signature) {
    var score = 0.1;
    if (fn === frame.function || (fn === "" && frame.function === "<module>")) score += 0.2;
    var source = squash(frame.source);
    if (source && signature && statementMatches(source, signature)) score += 0.8;
    else if (source && signature && RAISING.test(frame.source)) return score;
    if (line <= frame.line && frame.line <= endLine) score += 0.8;
    return score;
  }

  function fileName(path) {
    var parts = path.replace(/\\/g, "/").split("/");
    return parts[parts.length - 1];
  }

  function movedFrameScore(frame, path, signature) {
    var score = 0.2;
    var source = squash(frame.source);
    if (source && signature && statementMatches(source, signature)) score += 0.8;
    var mine = fileName(frame.path), theirs = path.slice(path.lastIndexOf("/") + 1);
    if (mine.endsWith(theirs) || theirs.endsWith(mine)) score += 0.1;
    return score;
  }

  function statementKey(fn, statement) {
    return fn + " " + LEADING_NAME.exec(statement)[0];
  }

  function signatureException(signature) {
    if (signature.startsWith("assert")) return "AssertionError";
    if (signature.startsWith("raise") && signature.length > 5) return signature.slice(5);
    return null;
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
   * where, score, match}]. `index.piece(name)` returns a promise of one index file's JSON.
   * `early`, if given, is called once the word and template shards are in, with the results
   * whose titles those shards already hold, before the entry shards arrive.
   */
  async function lookup(text, index, limit, early) {
    limit = limit || 10;
    var paste = parsePaste(text.slice(-MAX_PASTE));
    var manifest = await index.piece("manifest.json");
    if (manifest.version !== INDEX_VERSION) throw new Error("search index version " + manifest.version + ", expected " + INDEX_VERSION);
    var words = queryTokens(paste);
    var forms = formsOf(paste);
    var named = exceptionsOf(paste);
    var names = unique(shardTokens(paste, words).map(function (w) {
      return String(bucket(w, manifest.token_buckets));
    }).concat(["none"]));
    var frame = paste.frame;
    var framePiece = frame ? "f/" + bucket(pathKey(frame.path), manifest.file_buckets) + ".json" : null;
    var functionKey = frame && frame.function && frame.source ? statementKey(frame.function, squash(frame.source)) : null;
    var functionPiece = functionKey ? "g/" + bucket(functionKey, manifest.function_buckets) + ".json" : null;
    var loading = names.map(function (name) {
      return index.piece("t/" + name + ".json");
    });
    var fileShardLoading = framePiece ? index.piece(framePiece) : Promise.resolve(null);
    var classesLoading = named.size ? index.piece("classes.json") : Promise.resolve({});
    var functionShardLoading = functionPiece ? index.piece(functionPiece) : Promise.resolve(null);
    var shards = await Promise.all(loading);
    var classes = await classesLoading;
    var byName = new Map();
    names.forEach(function (name, i) {
      byName.set(name, shards[i]);
    });

    var evidence = new Map(); // error id: [template, frame, word]
    var matchedHow = new Map();
    var notes = new Map(); // error id: the note of the form its template match is on
    var retired = new Set(); // errors no longer raised, among those a template or the frame matched
    var classFits = new Map();
    var known = new Map(); // error id: a result from a template record
    function slotOf(id) {
      if (!evidence.has(id)) evidence.set(id, [0, 0, 0]);
      return evidence.get(id);
    }

    shards.forEach(function (shard) {
      shard.templates.forEach(function (record) {
        var id = record[0], exception = record[1], segments = record[3];
        var scored = templateScore(forms, segments, !!record[4], !!record[5], exception, manifest, classes);
        var value = scored[0];
        if (value > 0) {
          var slot = slotOf(id);
          if (value > slot[0]) {
            slot[0] = value;
            matchedHow.set(id, scored[1]);
            notes.set(id, record.length > 6 ? record[6] : "");
            classFits.set(id, scored[2] === null || exception === null || sameClass(scored[2], exception, classes));
          }
          if (record.length > 7 && record[7]) retired.add(id);
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

    var raised = new Set();
    var atLine = new Map(); // error id: the releases that raised it at the frame's line, when earlier ones
    // Raised in a function of the frame's name in another file: taken as raised only when no
    // template explains the message surely.
    var elsewhere = new Set();
    function found(id, value, signature, moved) {
      if (value >= 0.9 || evidence.has(id)) {
        var slot = slotOf(id);
        slot[1] = Math.max(slot[1], value);
      }
      if (value >= 1.0) {
        var exception = signatureException(signature);
        var fitsNamed = false;
        named.forEach(function (name) {
          if (exception !== null && sameClass(name, exception, classes)) fitsNamed = true;
        });
        if (!named.size || exception === null || fitsNamed) (moved ? elsewhere : raised).add(id);
      }
    }
    var fileShard = await fileShardLoading;
    if (fileShard) {
      Object.keys(fileShard).sort().forEach(function (sitePath) {
        if (!pathMatches(frame.path, sitePath)) return;
        fileShard[sitePath].forEach(function (site) {
          // A place of an earlier release counts by its function and statement: its line, in
          // a file whose lines every release moves, only says which releases the traceback
          // may come from.
          var earlier = site.length > 5 && site[5] !== "";
          if (site.length > 6 && site[6]) retired.add(site[0]);
          var value = earlier ? frameScore(frame, site[1], 0, -1, site[4]) : frameScore(frame, site[1], site[2], site[3], site[4]);
          if (earlier && site[2] === frame.line && value >= 1.0) {
            atLine.set(site[0], site[5]);
            // Of sites alike, the one an earlier release raised at the traceback's line goes first.
            value += AT_LINE;
          }
          found(site[0], value, site[4]);
        });
      });
    }
    var functionShard = await functionShardLoading;
    if (functionShard && Object.prototype.hasOwnProperty.call(functionShard, functionKey)) {
      functionShard[functionKey].forEach(function (site) {
        if (site.length > 3 && site[3]) retired.add(site[0]);
        if (!pathMatches(frame.path, site[1])) found(site[0], movedFrameScore(frame, site[1], site[2]), site[2], true);
      });
    }
    var sure = false;
    evidence.forEach(function (slot, id) {
      if (slot[0] >= 1 && classFits.get(id)) sure = true;
    });
    // The same statement in a function of that name in several other places is no sign of
    // which one the traceback went through.
    var active = Array.from(elsewhere).filter(function (id) { return !retired.has(id); });
    if ((active.length || elsewhere.size) === 1) {
      elsewhere.forEach(function (id) {
        if (!sure || evidence.get(id)[0] >= 1) raised.add(id);
      });
    }

    var results = [];
    var best = [null, null]; // by tier (raised, not): the best template of an error raised now that fits
    evidence.forEach(function (slot, id) {
      var word = knownWeight ? Math.min(1, (totals.get(id) || 0) / knownWeight) : 0;
      var score = round6(slot[0] + slot[1] + word);
      if (score >= manifest.min_score) {
        var fits = (slot[0] >= 1 && classFits.get(id)) || raised.has(id);
        var tier = raised.has(id) ? 0 : 1;
        if (fits && !retired.has(id) && (best[tier] === null || slot[0] > best[tier])) best[tier] = slot[0];
        results.push([tier, fits ? 0 : 1, score, id, fits && retired.has(id) ? slot[0] : null]);
      }
    });
    // Raised now before no longer raised, among those the message explains as well.
    results.forEach(function (item) {
      item[4] = item[4] !== null && best[item[0]] !== null && item[4] <= best[item[0]] ? 1 : 0;
    });
    results.sort(function (a, b) {
      return a[0] - b[0] || a[1] - b[1] || a[4] - b[4] || b[2] - a[2] || compareIds(a[3], b[3]);
    });
    results = results.slice(0, limit);
    function howOf(id) {
      // A bare assert found by the statement its frame printed: where it was raised says more.
      if (frame && paste.message === frame.source && raised.has(id)) return "traceback";
      return matchedHow.get(id) || (evidence.get(id)[1] >= 0.9 ? "traceback" : "words");
    }
    function noteOf(id, row) {
      // An error no longer raised says so, whatever form it matched by.
      var line = atLine.has(id) ? "the traceback's line is where SGLang " + atLine.get(id) + " raised it" : "";
      return [matchedHow.has(id) ? notes.get(id) || "" : "", row && row.length > 5 ? row[5] : "", line].filter(Boolean).join("; ");
    }

    if (early) {
      var ready = [];
      for (var r = 0; r < results.length && known.has(results[r][3]); r++) {
        ready.push(Object.assign({}, known.get(results[r][3]), { score: results[r][2], match: howOf(results[r][3]), note: noteOf(results[r][3]) }));
      }
      if (ready.length) early(ready);
    }

    var entryShards = await Promise.all(results.map(function (item) {
      return index.piece("e/" + bucket(item[3], manifest.entry_buckets) + ".json");
    }));
    return results.map(function (item, i) {
      var row = entryShards[i][item[3]];
      return {
        id: item[3],
        title: row[2],
        message: row[3] ? row[2] : null,
        exception: row[0],
        kind: row[1],
        where: row[4],
        score: item[2],
        match: howOf(item[3]),
        note: noteOf(item[3], row),
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

    var HOW = {
      message: "exact match: ",
      beginning: "matches the beginning of ",
      traceback: "raised where the traceback points: ",
      words: "similar: ",
    };

    function render(results, searching) {
      var heading = document.createElement("p");
      heading.textContent = results.length === 1 ? "1 matching error" : results.length + " matching errors";
      if (searching) heading.textContent += " (still searching…)";
      var list = document.createElement("ol");
      list.className = "search-results";
      results.forEach(function (result) {
        var item = document.createElement("li");
        // How the paste found it: its message whole, its beginning, the traceback's raising
        // line, or only some of its words (a similar error, not this one for sure).
        var label = document.createElement("span");
        label.className = "search-result-how search-result-" + result.match;
        label.textContent = HOW[result.match] || "similar: ";
        item.append(label);
        var link = document.createElement("a");
        link.href = root + "errors/" + result.id + "/";
        link.textContent = result.title;
        var about = document.createElement("span");
        about.className = "search-result-meta";
        about.textContent =
          " " + (result.exception || "unknown exception") + (result.where ? " · " + result.where : "");
        item.append(link, about);
        if (result.note) {
          // The form it matched is not its message now: an earlier wording, and its releases.
          var note = document.createElement("span");
          note.className = "search-result-note";
          note.textContent = " · " + result.note;
          item.append(note);
        }
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

// The review pages: keyboard scoring, inline answers from the lineage, live updates (SSE).
"use strict";

// The rater's name: asked once, remembered in this browser, sent with every score and action
// (the server refuses one without a name rather than record it under a made-up one)
const rater = document.getElementById("rater");
const raterName = () => (rater ? rater.value.trim() : "");
function rememberRater() {
  if (!rater) return;
  if (raterName()) localStorage.setItem("rater", raterName());
  // and for the server, which renders each card for this rater: with several raters, the
  // reading a rater may correct is their own (none known: the card asks for the name)
  document.cookie = "review_rater=" + encodeURIComponent(raterName()) + "; path=/; " +
    "samesite=strict; max-age=" + (raterName() ? 31536000 : 0);
  rater.classList.toggle("missing", !raterName());
}
// the cards were rendered for the name the server knew: another name (remembered in this
// browser, or typed now) has the cards that show a rater's own reading rendered again, for it
function cardsForRater() {
  const cards = document.querySelector("section.cards[data-rater]");
  if (!cards || cards.dataset.rater === raterName()) return;
  cards.dataset.rater = raterName();
  document.querySelectorAll(".card-body[data-card]").forEach((body) => {
    if (body.querySelector("[data-for-rater]")) refreshCard(body, true);
  });
}
if (rater) {
  rater.value = localStorage.getItem("rater") || rater.value;  // else the name given at sign-in
  rater.addEventListener("input", rememberRater);
  rater.addEventListener("change", cardsForRater);
  rememberRater();
  cardsForRater();
}

async function send(form) {
  const message = form.querySelector(".message") || form.parentElement.querySelector(".message");
  const data = new FormData(form);
  if (rater && !raterName()) {
    message.textContent = "Type your name first (“Your name”, at the top): every score is " +
      "recorded under it. It is asked once and remembered.";
    message.className = "message error";
    rater.focus();
    return;
  }
  if (rater) data.set("rater", raterName());
  message.textContent = "…";
  message.className = "message";
  if (form.classList.contains("correct")) {
    // a correction sends the wishes its chips hold, in their order
    form.querySelectorAll(".chip").forEach((chip) => data.append("want", chip.dataset.want));
  } else if (form.classList.contains("score")) {
    await confirmReading(form, data);
  }
  try {
    const response = await fetch(form.action, { method: "POST", body: data });
    const answer = await response.json();
    message.textContent = answer.ok || answer.error;
    message.className = "message " + (answer.ok ? "ok" : "error");
    if (answer.ok && form.classList.contains("score")) {
      form.reset();
      warnMoved(form, null);
      forgetReading(form);
    }
  } catch (err) {
    message.textContent = "Not sent: " + err;
    message.className = "message error";
  }
}

document.querySelectorAll("form.score, form.action").forEach((form) => {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    send(form);
  });
  const comment = form.querySelector("textarea");
  if (comment) {
    comment.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {  // Shift+Enter: a new line
        event.preventDefault();
        send(form);
      }
    });
  }
});

// j / k: the next / previous lineage's score field
const scoreInputs = Array.from(document.querySelectorAll(".score-input"));
document.addEventListener("keydown", (event) => {
  const typing = event.target.matches("textarea, input:not(.score-input), select");
  if (typing || !scoreInputs.length || (event.key !== "j" && event.key !== "k")) return;
  event.preventDefault();
  const at = scoreInputs.indexOf(document.activeElement);
  const next = event.key === "j" ? at + 1 : at - 1;
  scoreInputs[(next + scoreInputs.length) % scoreInputs.length].focus();
});
const waiting = document.querySelector(".card .status.awaiting_score");
const firstField = waiting
  ? waiting.closest(".card").querySelector(".score-input")
  : scoreInputs[0];
// focus the score field without scrolling past the output it scores; the name first, once
if (rater && !raterName() && scoreInputs.length) {
  rater.focus({ preventScroll: true });
  // Enter or Tab from the name: on to the score field
  rater.addEventListener("keydown", (event) => {
    if ((event.key === "Enter" || event.key === "Tab") && raterName() && firstField) {
      event.preventDefault();
      firstField.focus({ preventScroll: true });
    }
  });
} else if (firstField) firstField.focus({ preventScroll: true });

// Live: the server says what changed (a row per lineage); fetch those cards, keep what is typed.
// ``anotherRater``: the card is rendered for a new name, whose reading a correction starts from
async function refreshCard(body, anotherRater = false) {
  const response = await fetch(body.dataset.card);
  if (!response.ok) return;
  // read whole before what is typed is looked at: nothing waits between that look and the
  // swap, so a chip clicked meanwhile is never lost
  const html = await response.text();
  // a correction being edited (and the focus in it) survives the refresh: the rater's chips
  // are theirs until sent (another rater's are not)
  const form = anotherRater ? null : body.querySelector("form.correct");
  const focused = form && form.contains(document.activeElement) ? document.activeElement : null;
  const editing = form && (focused || form.classList.contains("edited")) ? form : null;
  // what the last correction did stays said while the card shows the same cycle
  const said = form && form.querySelector(".message");
  const before = body.querySelector("header") && body.querySelector("header").dataset.cycle;
  // a trace or version history the rater opened stays open
  const traceOpen = Boolean(body.querySelector("details.trace[open]"));
  const versionsOpen = Boolean(body.querySelector("details.versions[open]"));
  body.innerHTML = html;
  const trace = body.querySelector("details.trace");
  if (trace && traceOpen) trace.open = true;
  const versions = body.querySelector("details.versions");
  if (versions && versionsOpen) versions.open = true;
  const fresh = body.querySelector("form.correct");
  const header = body.querySelector("header");
  if (editing && fresh) {
    fresh.replaceWith(editing);
    if (focused) focused.focus();
    if (editing.classList.contains("edited")) sayCorrection(editing);
  } else if (fresh && said && said.textContent && header && header.dataset.cycle === before) {
    const message = fresh.querySelector(".message");
    [message.textContent, message.className] = [said.textContent, said.className];
  }
  // the score form names the output the card now shows (a re-run replaces it); a score being
  // typed stays on the cycle it was typed for: if that cycle has gone on meanwhile, the score
  // is refused and said so, never landed on an output the rater has not read
  const card = body.closest(".card");
  const score = card.querySelector("form.score");
  const typed = score && score.querySelector("[name=comment]").value.trim();
  const started = typed || (score && score.querySelector("[name=score]").value.trim());
  const cycle = card.querySelector("input[name=cycle]");
  const moved = header && cycle && cycle.value && cycle.value !== header.dataset.cycle;
  if (header && cycle && !(started && moved)) cycle.value = header.dataset.cycle;
  if (moved && !started) {
    // what the last score did stays said, as earlier: the new output is not scored yet
    const said = score.querySelector(".message");
    if (said.textContent && !said.textContent.startsWith("Earlier: ")) {
      said.textContent = "Earlier: " + said.textContent;
    }
    said.className = "message muted";
  }
  const output = card.querySelector("input[name=output_id]");
  if (header && output && !(started && moved)) output.value = header.dataset.output;
  if (score && header) warnMoved(score, started && moved ? cycle.value : null, header.dataset);
  // several raters: the preview of what is typed says what the others have asked so far, and
  // one of them may have just scored, or scored again: it is read again
  if (typed && body.querySelector(".scores-progress")) readLater(score);
}

// A score typed for a cycle that went on meanwhile (the other raters scored, or it ran again):
// said at once, not only when sent and refused, with a way to send it for the output the card
// now shows, once the rater has read it. ``from``: the cycle the score is typed for, or null.
function warnMoved(score, from, shown) {
  let warn = score.querySelector(".moved");
  if (!from) {
    if (warn) warn.remove();
    return;
  }
  if (!warn) {
    warn = document.createElement("p");
    warn.className = "moved";
    warn.setAttribute("role", "alert");
    const move = document.createElement("button");
    move.type = "button";
    move.addEventListener("click", () => {
      score.querySelector("input[name=cycle]").value = move.dataset.cycle;
      score.querySelector("input[name=output_id]").value = move.dataset.output;
      warn.remove();
      score.querySelector("[name=comment]").focus();
      readLater(score);  // the others' wishes so far are this cycle's now
    });
    warn.append(document.createElement("span"), " ", move);
    score.querySelector("button[type=submit]").before(warn);
  }
  warn.querySelector("span").textContent = `Cycle ${from} went on while you typed: the card ` +
    `now shows cycle ${shown.cycle}. Sent as it is, your score is refused (cycle ${from} ` +
    "is closed); what you typed is kept.";
  const move = warn.querySelector("button");
  move.textContent = `Score cycle ${shown.cycle} with it`;
  [move.dataset.cycle, move.dataset.output] = [shown.cycle, shown.output];
}

async function refreshInbox(table) {
  const response = await fetch(table.dataset.rows);
  if (response.ok) document.getElementById("inbox-rows").innerHTML = await response.text();
}

const live = document.querySelector("[data-live]");
if (live && window.EventSource) {
  let seen = null;  // the first event describes the state the page was rendered from
  const source = new EventSource(live.dataset.live);
  source.addEventListener("change", (event) => {
    const now = JSON.parse(JSON.parse(event.data));
    if (live.classList.contains("inbox")) {
      if (seen !== null) refreshInbox(live);
    } else {
      const rows = new Map(now.map((row) => [row[0], JSON.stringify(row)]));
      if (seen !== null) {
        for (const [lineage, row] of rows) {
          if (seen.get(lineage) === row) continue;
          const body = document.querySelector(`[data-lineage="${CSS.escape(lineage)}"] .card-body`);
          if (body) refreshCard(body);
        }
      }
      seen = rows;
      return;
    }
    seen = now;
  });
}

// Chips: each is a wish, in words ("shorter: about half", "no table"); Enter or a click removes
// it; the picker adds one ("less" + "formal tone", "shorter" + "half"), checked and put in words
// by the app. The card body is replaced when the lineage changes, so the listeners sit on the
// document.
function chipFor(want, label) {
  const chip = document.createElement("button");
  chip.type = "button";
  chip.className = "chip";
  chip.dataset.want = want;
  chip.dataset.label = label;
  chip.setAttribute("aria-label", "remove " + label);
  chip.textContent = label + " ×";  // text, never markup
  return chip;
}

// the wish the picker names, checked by the app: {want, label} or {error}
async function picked(form) {
  const action = form.querySelector(".pick-action").value;
  const family = form.querySelector(".pick-family").value;
  // as typed: the app puts the names in lower case and keeps a sentence's own case
  const amount = form.querySelector(".pick-amount").value.trim();
  const want = (action === "add" ? "" : action + ":") + family + (amount ? ":" + amount : "");
  try {
    const response = await fetch("/wants/label?want=" + encodeURIComponent(want));
    return await response.json();
  } catch (err) {
    return { error: "Not checked: " + err };
  }
}

async function addWant(form) {
  const wish = await picked(form);
  const note = form.querySelector(".reading .note") || form.querySelector(".message");
  if (wish.error) {
    note.textContent = wish.error;
    note.classList.add("error");
    return;
  }
  note.classList.remove("error");
  form.querySelector(".pick-amount").value = "";
  if (form.classList.contains("score")) {
    addToReading(form, wish);
  } else {
    form.querySelector(".chips").appendChild(chipFor(wish.want, wish.label));
    sayCorrection(form);
  }
}

document.addEventListener("click", (event) => {
  const form = event.target.closest("form.correct, form.score");
  if (!form) return;
  const chip = event.target.closest(".chip");
  const proposed = event.target.closest(".propose");
  // a click anywhere on a change's row, not only on its words, leaves it out or puts it back
  const row = event.target.closest(".plan li");
  const change = event.target.closest(".plan .change") || (row && row.querySelector(".change"));
  if (change) {  // a change of the plan left out, or put back
    const r = readingOf(form);
    if (r.leftOut.has(change.dataset.key)) r.leftOut.delete(change.dataset.key);
    else r.leftOut.add(change.dataset.key);
    showReading(form);
    const again = form.querySelector(`.plan .change[data-key="${CSS.escape(change.dataset.key)}"]`);
    if (again) again.focus();
    return;
  }
  if (form.classList.contains("correct")) form.classList.add("edited");
  if (chip) {
    const next = chip.nextElementSibling || form.querySelector(".pick-action");
    if (form.classList.contains("score")) {
      removeFromReading(form, chip.dataset.want);
      const same = next.dataset && next.dataset.want &&
        form.querySelector(`.chip[data-want="${CSS.escape(next.dataset.want)}"]`);
      (same || form.querySelector(".pick-action")).focus();
    } else {
      chip.remove();
      next.focus();
      sayCorrection(form);
    }
  } else if (proposed) {
    addToReading(form, { want: proposed.dataset.want, label: proposed.dataset.label });
  } else if (event.target.closest(".add-want")) {
    addWant(form);
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && event.target.matches(".pick-amount")) {
    event.preventDefault();  // Enter in the amount adds the wish; the button sends them
    addWant(event.target.closest("form"));
  }
  const form = event.target.closest && event.target.closest("form.correct");
  if (form) form.classList.add("edited");
});

// The reading previewed as the rater types: the lineage's step reads the score and comment as
// it would act on them (the same reader, corrections and trainer), and the chips show it. The
// rater's edits (wishes removed, wishes added) are kept apart and laid over every fresh
// reading; Enter sends the chips as the score's wants, so the step acts on exactly them.
// Below the chips, the step's plan: every change it would make, each one the rater may leave
// out (a click); the score carries the keys of the others, and the step makes those only.
// Chips edited, the plan is asked again for them.
const READ_DELAY_MS = 300;
const readings = new WeakMap();

function readingOf(form) {
  if (!readings.has(form)) {
    readings.set(form, { timer: null, seq: 0, pending: null, answer: null,
      removed: new Set(), added: [], planSeq: 0, planPending: null, planned: null,
      leftOut: new Set() });
  }
  return readings.get(form);
}

// the answer whose plan the score would be sent with: the comment's reading, or, the chips
// edited, the plan asked for them
function planOf(r) {
  return edited(r) ? r.planned : r.answer;
}

function replan(form) {
  const r = readingOf(form);
  const seq = ++r.planSeq;
  r.planned = null;
  if (!edited(r)) {
    r.planPending = null;
    return;
  }
  const data = new FormData();
  data.set("score", form.querySelector("[name=score]").value);
  data.set("comment", form.querySelector("[name=comment]").value);
  data.set("edited", "1");
  chipsOf(r).forEach((c) => data.append("want", c.want));
  const url = form.action.replace(/\/score$/, "/read");
  const pending = fetch(url, { method: "POST", body: data })
    .then((response) => response.json())
    .catch((err) => ({ error: "No plan: " + err }))
    .then((answer) => {
      if (seq !== r.planSeq) return;
      r.planned = answer;
      r.planPending = null;
      showReading(form);
    });
  r.planPending = pending;
}

function chipsOf(r) {
  const read = (r.answer && r.answer.chips ? r.answer.chips : [])
    .filter((c) => !r.removed.has(c.want));
  return read.concat(r.added.filter((c) => !read.some((d) => d.want === c.want)));
}

function edited(r) {
  return r.removed.size > 0 || r.added.length > 0;
}

function readLater(form) {
  const r = readingOf(form);
  clearTimeout(r.timer);
  r.timer = setTimeout(() => readNow(form), READ_DELAY_MS);
}

function readNow(form) {
  const r = readingOf(form);
  clearTimeout(r.timer);
  r.timer = null;
  const seq = ++r.seq;
  const comment = form.querySelector("[name=comment]").value;
  if (!comment.trim()) {
    r.answer = null;
    r.pending = null;
    showReading(form);
    return Promise.resolve();
  }
  const data = new FormData();
  data.set("score", form.querySelector("[name=score]").value);
  data.set("comment", comment);
  const url = form.action.replace(/\/score$/, "/read");
  const pending = fetch(url, { method: "POST", body: data })
    .then((response) => response.json())
    .catch((err) => ({ error: "No preview: " + err }))
    .then((answer) => {
      if (seq !== r.seq) return;  // a later keystroke asked again
      r.answer = answer;
      r.pending = null;
      showReading(form);
    });
  r.pending = pending;
  replan(form);  // the comment goes with the score: an edited plan is asked again with it
  return pending;
}

// the reading of what is typed now (waiting for the one in flight)
async function settled(form) {
  const r = readingOf(form);
  if (r.timer) readNow(form);
  while (r.pending || r.planPending) await (r.pending || r.planPending);
  return r.answer && !r.answer.error ? r.answer : null;
}

async function confirmReading(form, data) {
  const r = readingOf(form);
  const answer = await settled(form);
  // wishes no chip can carry (a topic, a request in the rater's words): sent as a comment for the step to read,
  // as previewed, unless the rater edited the chips
  if ((answer && answer.exact) || edited(r)) {
    data.set("confirmed", "1");
    chipsOf(r).forEach((c) => data.append("want", c.want));
  }
  // the plan shown, less the changes left out: the step makes these and no other
  const plan = planOf(r);
  if (plan && !plan.error && plan.planned) {
    data.set("planned", "1");
    plan.changes.filter((c) => !r.leftOut.has(c.key)).forEach((c) => data.append("change", c.key));
  }
}

function forgetReading(form) {
  const r = readingOf(form);
  r.seq++;
  r.planSeq++;
  r.answer = null;
  r.pending = null;
  r.planned = null;
  r.planPending = null;
  r.removed.clear();
  r.added = [];
  r.leftOut.clear();
  showReading(form);
}

function addToReading(form, wish) {
  const r = readingOf(form);
  r.removed.delete(wish.want);
  if (!chipsOf(r).some((c) => c.want === wish.want)) r.added.push(wish);
  replan(form);
  showReading(form);
}

function removeFromReading(form, want) {
  const r = readingOf(form);
  r.added = r.added.filter((c) => c.want !== want);
  r.removed.add(want);
  replan(form);
  showReading(form);
}

// the plan under the chips: each change a button that leaves it out (or puts it back)
function showPlan(form, r) {
  const box = form.querySelector(".reading");
  const lead = box.querySelector(".plan-lead");
  const list = box.querySelector(".plan");
  if (!lead || !list) return;
  const plan = planOf(r);
  list.textContent = "";
  if (!plan || plan.error) {
    lead.textContent = edited(r) && !plan ? "Changes: planning for the chips as edited…" : "";
    return;
  }
  if (!plan.planned) {
    lead.textContent = "Changes: planned by the step when the score arrives, and said back after.";
    return;
  }
  lead.textContent = plan.changes.length
    ? "Changes the step makes, and only these (click one to leave it out):"
    : "Changes: none, the agent stays as it is.";
  for (const c of plan.changes) {
    const item = document.createElement("li");
    const change = document.createElement("button");
    change.type = "button";
    change.className = "change" + (r.leftOut.has(c.key) ? " dropped" : "");
    change.dataset.key = c.key;
    change.title = c.why;
    change.textContent = c.label;  // text, never markup
    change.setAttribute("aria-pressed", r.leftOut.has(c.key) ? "true" : "false");
    item.appendChild(change);
    list.appendChild(item);
  }
  for (const note of plan.plan_notes || []) {
    const item = document.createElement("li");
    item.className = "not-done";
    item.textContent = "not done: " + note;
    list.appendChild(item);
  }
}

// the reading as edited, in the chips' words ("Read as (edited): shorter: about half, no table")
function saidOf(chips) {
  const asked = chips.map((c) => c.label).join(", ");
  return "Read as (edited): " + (asked || "no change asked for");
}

// a correction's chips edited: the card's reading line says them (sent, the card shows the
// lineage's reading again). Several raters: the card's line is what they agreed on, and the
// chips are this rater's own reading, said in the form's own line
function sayCorrection(form) {
  const chips = Array.from(form.querySelectorAll(".chips .chip"),
    (c) => ({ label: c.dataset.label }));
  const own = form.querySelector(".own-reading");
  if (own) {
    own.textContent = "Your reading (edited): " +
      (chips.map((c) => c.label).join(", ") || "no change asked for");
    return;
  }
  const line = form.closest(".card-body") && form.closest(".card-body").querySelector(".last-reading");
  if (!line) return;
  line.textContent = saidOf(chips);
}

function showReading(form) {
  const r = readingOf(form);
  const box = form.querySelector(".reading");
  if (!box) return;
  const answer = r.answer || {};
  box.hidden = !r.answer && !edited(r);
  const chips = chipsOf(r);
  const said = box.querySelector(".said");
  // edited, the chips are what the step acts on: the line says them, not the comment's reading
  said.textContent = answer.error || (edited(r) ? saidOf(chips) : answer.said_back || "");
  said.className = "said" + (answer.error ? " error" : "");
  // several raters: what the others have asked so far on this output (text, never markup)
  const others = box.querySelector(".others");
  if (others) {
    others.textContent = answer.others && answer.others.length
      ? "Other raters so far: " + answer.others.join("; ")
      : "";
  }
  // chips left as read, with more in the comment than they carry: the step reads the comment
  box.querySelector(".lead").textContent = answer.error || answer.exact || edited(r)
    ? "Enter acts on these, and only these:"
    : "Read so far (Enter sends the comment for the step to read as shown):";
  const holder = box.querySelector(".chips");
  // a chip in focus keeps it when the chips are drawn again (a reading read again meanwhile)
  const focused = holder.contains(document.activeElement) && document.activeElement.dataset.want;
  holder.textContent = "";
  chips.forEach((c) => holder.appendChild(chipFor(c.want, c.label)));
  if (!chips.length) holder.textContent = "nothing to change";
  const again = focused && holder.querySelector(`.chip[data-want="${CSS.escape(focused)}"]`);
  if (again) again.focus();
  const unsure = box.querySelector(".unsure");
  unsure.textContent = "";
  for (const u of answer.unsure || []) {
    const item = document.createElement("li");
    const said = u.standing ? "in the way" : "not understood";
    item.textContent = `${said}: “${u.quote}” (${u.why})`;
    for (const c of u.proposed) {
      const add = document.createElement("button");
      add.type = "button";
      add.className = "propose";
      add.dataset.want = c.want;
      add.dataset.label = c.label;
      add.textContent = "+ " + c.label;
      item.append(" ", add);
    }
    unsure.appendChild(item);
  }
  const notes = [];
  if (answer.incomplete) notes.push(answer.incomplete);
  if (answer.handed_over && answer.handed_over.length) {
    notes.push("Read by Claude: " + answer.handed_over.map((c) => `“${c}”`).join(", ") + ".");
  }
  if (answer.unsaid && answer.unsaid.length) {
    notes.push("Also read, which no chip can carry: " + answer.unsaid.join("; ") +
      (edited(r) ? ". Dropped, since you edited the chips." : ". Kept while you leave the chips as they are."));
  }
  const note = box.querySelector(".note");
  note.textContent = notes.join(" ");
  note.classList.remove("error");
  showPlan(form, r);
}

document.querySelectorAll("form.score").forEach((form) => {
  form.querySelectorAll("[name=score], [name=comment]").forEach((field) => {
    field.addEventListener("input", () => readLater(form));
  });
});
document.addEventListener("submit", async (event) => {
  if (!event.target.matches("form.correct")) return;
  event.preventDefault();
  const form = event.target;
  await send(form);
  form.classList.remove("edited");  // sent: the card shows the new reading
  const said = form.querySelector(".message");
  const body = form.closest(".card-body");
  if (!said.classList.contains("ok") || !body) return;
  // at once, even when nothing new was made (no new version: nothing else would refresh it),
  // with what the correction did kept on the fresh card
  if (form.contains(document.activeElement)) document.activeElement.blur();
  await refreshCard(body);
});

// A branch from a version in a card's history: a new lineage of the session, whose card the
// page shows once reloaded (the cards are the session's lineages as the page was rendered)
document.addEventListener("submit", async (event) => {
  if (!event.target.matches("form.branch")) return;
  event.preventDefault();
  await send(event.target);
  if (event.target.querySelector(".message.ok")) setTimeout(() => location.reload(), 600);
});

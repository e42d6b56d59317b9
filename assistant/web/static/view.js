// The conversation on the page. Every text goes in as text (textContent), never as HTML:
// a message holding "<script>" shows those characters.

const log = document.getElementById("log");

export function element(tag, className, text) {
  const made = document.createElement(tag);
  if (className) made.className = className;
  if (text !== undefined) made.textContent = text;
  return made;
}

function clock(at) {
  if (!at) return null;
  const when = new Date(at);
  const shown = element("time", "", when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }));
  shown.dateTime = at;
  return shown;
}

export class Conversation {
  constructor() {
    this.entries = new Map(); // message number -> its element
    this.streaming = null; // the reply being written: {root, body}
    this.pendingSteps = []; // tool steps shown before their message joined
    this.summarizing = null;
    this.hearingEntry = null; // the user's words as they are heard, before they are a message
    this.unnumbered = null; // a reply shown whole whose message has not come yet
  }

  clear() {
    log.replaceChildren();
    this.entries.clear();
    this.streaming = null;
    this.pendingSteps = [];
    this.summarizing = null;
    this.hearingEntry = null;
    this.unnumbered = null;
  }

  // What the user is saying, as heard so far; then (`heard`) what the whole utterance said,
  // shown as their message until it joins the conversation with its number ("" : nothing).
  hearing(words) {
    if (!this.hearingEntry) {
      this.hearingEntry = this.entry("user");
      this.hearingEntry.classList.add("hearing");
    }
    this.hearingEntry.querySelector(".body").textContent = words;
  }

  heard(words) {
    if (!words) {
      this.hearingEntry?.remove();
      this.hearingEntry = null;
      return;
    }
    this.hearing(words);
  }

  // A numbered message: the user's, Parley's answer, or a tool's result (as a step).
  message(m) {
    const known = this.entries.get(m.seq);
    if (known) { // sent again: its text changed (a spoken reply noted as cut short)
      (known.querySelector(".body") || known.querySelector(".result")).textContent = m.text;
      return;
    }
    if (m.role === "tool") {
      const step = this.pendingSteps.shift() || this.step(m.label || m.tool);
      step.root.querySelector(".seq").textContent = `#${m.seq}`;
      step.result.textContent = m.text;
      this.entries.set(m.seq, step.root);
      return;
    }
    let root;
    if (m.role === "user" && this.hearingEntry) {
      root = this.hearingEntry; // the words heard: now numbered, as the model was given them
      root.classList.remove("hearing");
      root.querySelector(".body").textContent = m.text;
      this.hearingEntry = null;
    } else if (m.role === "assistant" && (this.streaming || this.unnumbered)) {
      // The reply shown as it was written (a spoken reply joins the conversation once it
      // has been said, after its `reply-done`).
      root = this.streaming ? this.streaming.root : this.unnumbered;
      root.classList.remove("streaming");
      root.querySelector(".body").textContent = m.text;
      this.streaming = null;
      this.unnumbered = null;
    } else {
      root = this.entry(m.role);
      root.querySelector(".body").textContent = m.text;
    }
    root.querySelector(".seq").textContent = `#${m.seq}`;
    const time = clock(m.at);
    if (time) root.querySelector(".seq").after(time);
    root.dataset.seq = m.seq;
    this.entries.set(m.seq, root);
  }

  entry(role) {
    const root = element("article", `entry ${role}`);
    root.append(element("span", "seq", "…"), element("span", "who", role === "user" ? "You" : "Parley"),
                element("span", "body"));
    log.append(root);
    return root;
  }

  // A piece of the answer as it is written.
  delta(text) {
    if (!this.streaming) {
      this.unnumbered = null;
      const root = this.entry("assistant");
      root.classList.add("streaming");
      this.streaming = { root, body: root.querySelector(".body") };
    }
    this.streaming.body.textContent += text;
  }

  // The reply ended: a text shown but never kept (a reply stopped) stays as it was shown.
  done(cancelled) {
    if (this.streaming) {
      this.streaming.root.classList.remove("streaming");
      if (!this.streaming.root.dataset.seq) this.unnumbered = this.streaming.root;
    }
    this.streaming = null;
    if (cancelled) this.line("Stopped.");
  }

  // A tool step: its label on a dim line, opening to its result.
  step(label) {
    const root = element("details", "step");
    const head = element("summary");
    head.append(element("span", "seq", ""), element("span", "label", stepText(label)));
    const result = element("pre", "result", "");
    root.append(head, result);
    log.append(root);
    const step = { root, result };
    return step;
  }

  toolCall(label) {
    this.streaming = null; // text after a tool is a new piece of the answer
    this.pendingSteps.push(this.step(label));
  }

  toolResult(content) {
    const step = this.pendingSteps.find((s) => !s.result.textContent);
    if (step) step.result.textContent = content;
  }

  line(text, kind = "") {
    const shown = element("p", `line ${kind}`.trim(), stepText(text));
    log.append(shown);
    return shown;
  }

  summaryStarted() {
    this.summarizing?.remove();
    this.summarizing = this.line("Summarizing the earlier conversation…");
  }

  summaryEnded(text) {
    this.summarizing?.remove();
    this.summarizing = null;
    if (text) this.line(text);
  }

  // The divider after the last message the summary covers, opening to its text.
  summary(text, coveredThrough) {
    this.summaryEnded("");
    log.querySelector(".divider")?.remove();
    if (!coveredThrough) return;
    const divider = element("details", "divider");
    divider.append(element("summary", "", "Summary of earlier conversation"), element("pre", "", text));
    const last = [...this.entries.keys()].filter((seq) => seq <= coveredThrough).sort((a, b) => a - b).pop();
    if (last !== undefined) this.entries.get(last).after(divider);
    else log.prepend(divider);
  }
}

// A step still going gets "…"; one that is a finished sentence keeps its stop (as the
// terminal shows them).
function stepText(text) {
  return text.endsWith("…") || text.endsWith(".") ? text : `${text}…`;
}

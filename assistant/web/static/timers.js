// Running timers counting down, and a timer that went off: seen, heard (a tone made in the
// page, nothing fetched) and stopped with its button.
import { element } from "./view.js";

function left(seconds) {
  const whole = Math.max(0, Math.ceil(seconds));
  const hours = Math.floor(whole / 3600);
  const minutes = Math.floor((whole % 3600) / 60);
  const rest = String(whole % 60).padStart(2, "0");
  return hours ? `${hours}:${String(minutes).padStart(2, "0")}:${rest}` : `${minutes}:${rest}`;
}

export class Timers {
  constructor(list, ringing) {
    this.list = list;
    this.ringing = ringing;
    this.running = [];
    setInterval(() => this.tick(), 1000);
  }

  // The server's listing: each timer's time left when it was sent.
  show(timers) {
    const now = performance.now() / 1000;
    this.running = timers.map((t) => ({ ...t, endsAt: now + t.left }));
    this.list.replaceChildren(...this.running.map((t) => {
      t.shown = element("p", "timer");
      return t.shown;
    }));
    this.tick();
  }

  tick() {
    const now = performance.now() / 1000;
    for (const t of this.running) {
      const remaining = t.paused ? t.left : t.endsAt - now;
      t.shown.textContent = `${t.description}: ${left(remaining)} left${t.paused ? " (paused)" : ""}`;
    }
  }

  ring(text) {
    const shown = element("div", "ring");
    shown.setAttribute("role", "alert");
    const button = element("button", "", "Stop the ringing");
    button.type = "button";
    shown.append(element("span", "", `${text} `), button);
    this.ringing.append(shown);
    const silence = this.beep();
    button.addEventListener("click", () => {
      silence();
      shown.remove();
    });
  }

  // Two short beeps a second until stopped (the browser may hold sound back until the
  // page was clicked or typed in once; the ring is still seen). Returns what stops them.
  beep() {
    let audio;
    try {
      audio = new AudioContext();
    } catch {
      return () => {};
    }
    const play = () => {
      for (const start of [0, 0.25]) {
        const oscillator = audio.createOscillator();
        const gain = audio.createGain();
        gain.gain.value = 0.15;
        oscillator.frequency.value = 880;
        oscillator.connect(gain).connect(audio.destination);
        oscillator.start(audio.currentTime + start);
        oscillator.stop(audio.currentTime + start + 0.15);
      }
    };
    play();
    const repeating = setInterval(play, 1000);
    return () => {
      clearInterval(repeating);
      audio.close();
    };
  }
}

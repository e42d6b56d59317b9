// Parley's voice in the page: the microphone, through an AudioWorklet, as 16 kHz mono
// 16-bit frames for the WebSocket, and the reply's audio frames played in order. One
// AudioContext at 16 kHz does both; it is made on the user's first press (a browser lets a
// page play sound only after one).

const RATE = 16000;

// Why the microphone cannot work here, or null.
export function microphoneUnavailable() {
  if (!window.isSecureContext) {
    return "Voice needs a secure page: open it at http://127.0.0.1 or http://localhost on " +
           "the machine Parley runs on, or over HTTPS. Typed chat works.";
  }
  if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
    return "This browser gives the page no microphone. Typed chat works.";
  }
  return null;
}

export class Voice {
  constructor(sendFrame) {
    this.sendFrame = sendFrame; // called with each microphone frame while listening
    this.listening = false; // frames go to Parley (Hands-free on, or Push to talk held)
    this.context = null;
    this.microphone = null; // a promise, once asked for
    this.playing = new Set();
    this.playEnds = 0; // context time the audio queued so far ends
    this.played = 0; // frames of reply audio that played to their end
  }

  // The AudioContext, made (or resumed) inside a user's press.
  wake() {
    if (!this.context) this.context = new AudioContext({ sampleRate: RATE });
    if (this.context.state === "suspended") this.context.resume();
    return this.context;
  }

  // The microphone, started once: resolves when frames flow, rejects with words to show.
  start() {
    const context = this.wake();
    if (!this.microphone) this.microphone = this.open(context);
    return this.microphone;
  }

  async open(context) {
    const unavailable = microphoneUnavailable();
    if (unavailable) throw new Error(unavailable);
    let stream;
    try {
      // Echo cancellation, so the user can speak over the reply; no noise suppression or
      // gain control: Parley hears the microphone as parley voice does. Both change where
      // its voice activity detector hears speech end, and it adapts to what it heard:
      // with them, turns ended up to 210 ms later (benchmarks/README.md).
      stream = await navigator.mediaDevices.getUserMedia({
        audio: { channelCount: 1, echoCancellation: true, noiseSuppression: false,
                 autoGainControl: false },
      });
    } catch (refused) {
      this.microphone = null; // allowed later (and the page reloaded), it is asked again
      throw new Error(refused && refused.name === "NotFoundError"
        ? "No microphone was found. Typed chat works."
        : "The microphone was refused: allow it for this page in the browser's site " +
          "settings, then reload. Typed chat works.");
    }
    await context.audioWorklet.addModule("static/mic-worklet.js");
    const frames = new AudioWorkletNode(context, "mic-frames");
    frames.port.onmessage = (message) => {
      if (this.listening) this.sendFrame(message.data);
    };
    const mute = context.createGain(); // connected so the worklet runs; heard by nobody
    mute.gain.value = 0;
    context.createMediaStreamSource(stream).connect(frames).connect(mute).connect(context.destination);
  }

  // One frame of the reply: a little-endian uint32 sample rate, then int16 samples.
  play(data) {
    const context = this.context;
    if (!context || data.byteLength <= 4) return; // no press yet: the page cannot play
    const rate = new DataView(data).getUint32(0, true);
    const samples = new Int16Array(data.slice(4));
    const buffer = context.createBuffer(1, samples.length, rate);
    const channel = buffer.getChannelData(0);
    for (let i = 0; i < samples.length; i++) channel[i] = samples[i] / 0x8000;
    const source = context.createBufferSource();
    source.buffer = buffer;
    source.connect(context.destination);
    const at = Math.max(context.currentTime, this.playEnds);
    source.start(at);
    this.playEnds = at + buffer.duration;
    this.playing.add(source);
    this.showPlaying();
    source.onended = () => {
      if (!this.playing.delete(source)) return; // stopped, not played out
      this.played += 1;
      document.body.dataset.audioPlayed = String(this.played);
      this.showPlaying();
    };
  }

  // How many frames are playing or queued, on the page's body (for tests and scripts).
  showPlaying() {
    document.body.dataset.audioPlaying = String(this.playing.size);
  }

  // Silence the reply at once, and drop what is queued.
  stop() {
    const stopped = [...this.playing];
    this.playing.clear();
    for (const source of stopped) source.stop();
    this.playEnds = 0;
    this.showPlaying();
  }
}

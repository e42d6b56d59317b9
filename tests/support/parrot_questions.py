"""Open and factual questions asked in turn, to catch a model that repeats itself.

The answers benchmark prints how alike the replies are and how many facts are right; the
real-model answers test asserts the replies stay apart: one copy of the questions for both.
"""

from __future__ import annotations

FACTS = [
    ("What is the capital of France?", ("paris",)),
    ("How many legs does a spider have?", ("eight", "8")),
    ("What is the largest planet in our solar system?", ("jupiter",)),
    ("Who wrote Romeo and Juliet?", ("shakespeare",)),
    ("What color is the sky on a clear day?", ("blue",)),
    ("What is the capital of Japan?", ("tokyo",)),
    ("How many days are there in a week?", ("seven", "7")),
    ("What is the opposite of hot?", ("cold",)),
    ("What language do people speak in Spain?", ("spanish",)),
    ("What is the tallest mountain in the world?", ("everest",)),
    ("Which animal is called the king of the jungle?", ("lion",)),
    ("What is the capital of Italy?", ("rome",)),
    ("What gas do plants take in from the air?", ("carbon dioxide", "co2")),
    ("What is frozen water called?", ("ice",)),
    ("How many continents are there?", ("seven", "7")),
    ("What do bees make?", ("honey",)),
]
"""Factual questions, each with the words a right answer holds (any one of them)."""
OPEN = [
    "Tell me a joke.", "What should I cook for dinner tonight?", "Why do cats purr?",
    "Describe the ocean in one sentence.", "How can I stay focused while working?",
    "Write a short poem about rain.", "What is your favourite colour?",
    "Suggest a hobby for the weekend.", "What is machine learning?", "How do airplanes fly?",
    "Recommend a book to read.", "My name is Sam. What is my name?",
    "How can I learn to play the guitar?", "Explain what a rainbow is.",
    "What makes a good friend?", "Why do leaves change colour in autumn?",
]
PARROT_QUESTIONS: list[str | tuple[str, tuple[str, ...]]] = [
    q for pair in zip(OPEN, FACTS, strict=True) for q in pair]
"""Open and factual questions in turn; a factual one with the words a right answer holds."""

"""Corpus-wide (aggregation) questions for the task head: no public data set holds them, so they are
written from templates. Two families that share no template, written apart: `train` teaches the head,
`test` measures it (docs/benchmarks/taxonomy.md). The test family leans on paraphrases without the
obvious cue words ("what is this collection mostly about?", "which subjects keep coming up?").
Fillers (scopes and subjects) are split too, so no test prompt repeats a training prompt's words."""

from __future__ import annotations

import random
from typing import Literal

Family = Literal["train", "test"]

TRAIN_TEMPLATES = (
    "What are the recurring themes in {scope}?",
    "What are the main topics covered by {scope}?",
    "Summarize the key themes across {scope}.",
    "What topics does {scope} cover?",
    "Give an overview of the subjects discussed in {scope}.",
    "What are the most common themes about {subject}?",
    "Which topics come up most often regarding {subject}?",
    "What are the major issues raised about {subject} across the documents?",
    "List the main themes of {scope}.",
    "What recurring patterns appear in discussions of {subject}?",
    "What kinds of topics are in {scope}?",
    "Summarise what {scope} says about {subject}.",
    "What are the dominant themes concerning {subject}?",
    "Across all documents, what are the main ideas about {subject}?",
    "What overall trends emerge from {scope}?",
    "Which themes recur throughout {scope}?",
    "What subjects does {scope} deal with?",
    "What are the central topics in {scope} related to {subject}?",
    "Give me a high-level summary of {scope}.",
    "What are the common threads in {scope}?",
    "Identify the main clusters of topics in {scope}.",
    "What broad categories of content does {scope} contain?",
    "In general, what do the documents say about {subject}?",
    "What are the key findings across {scope} on {subject}?",
    "Which areas are covered most in {scope}?",
    "What themes about {subject} appear repeatedly?",
    "What are the main subjects of {scope}?",
    "Provide an overview of the topics about {subject}.",
    "What is the overall picture that {scope} paints of {subject}?",
    "Can you summarize {scope} for me?",
    "Group {scope} into its main topics.",
    "What do most of the documents in {scope} focus on?",
    "Which themes about {subject} are shared by many documents?",
    "What are {scope} generally concerned with?",
    "How is {subject} covered across {scope}?",
    "What issues come up repeatedly in {scope}?",
    "Give a short synopsis of everything in {scope}.",
    "What are the big themes of {scope}?",
    "What is the range of subjects in {scope}?",
    "Map out the topics discussed in {scope}.",
    "What patterns run through {scope} when it comes to {subject}?",
    "Which subjects are most represented in {scope}?",
    "What general conclusions about {subject} can be drawn from {scope}?",
    "Describe the topical landscape of {scope}.",
    "What are the recurring concerns across {scope}?",
    "Tell me what {scope} discusses overall.",
    "What main narratives about {subject} appear in {scope}?",
    "What ideas show up again and again in {scope}?",
)
TEST_TEMPLATES = (
    "What is {scope} mostly about?",
    "Which subjects keep coming up in {scope}?",
    "Tell me the big picture of {scope}.",
    "What does {scope} talk about, broadly?",
    "What are the prevailing ideas on {subject} in {scope}?",
    "Break down {scope} by topic.",
    "Which issues about {subject} are mentioned again and again?",
    "What ground does {scope} cover?",
    "Sum up the material in {scope}.",
    "What sorts of things does {scope} discuss about {subject}?",
    "Give me the gist of {scope}.",
    "Which fields are represented in {scope}?",
    "How would you characterise the content of {scope}?",
    "What are the typical concerns raised about {subject}?",
    "Describe the main strands of {scope}.",
    "What is discussed most frequently about {subject}?",
    "Which topics dominate {scope}?",
    "Outline the principal subjects of {scope}.",
)
TRAIN_SCOPES = ("the corpus", "these documents", "the collection", "our knowledge base", "all the articles",
                "the dataset", "these reports", "the archive", "the files", "this set of passages",
                "the indexed documents", "the papers", "the notes", "the wiki", "our docs", "the manuals",
                "this content", "the repository", "the transcripts", "all the entries", "the handbook",
                "the logs", "the literature", "my files")
TEST_SCOPES = ("this collection", "the material", "everything indexed", "the whole library", "these texts",
               "the document set", "the sources", "all of these pages", "the records")
TRAIN_SUBJECTS = ("climate change", "football", "the economy", "elections", "music", "public health",
                  "immigration", "space exploration", "education", "artificial intelligence", "film",
                  "world war ii", "religion", "architecture", "trade", "medicine", "the olympics", "energy",
                  "television", "literature", "human rights", "agriculture", "banking", "cricket")
TEST_SUBJECTS = ("privacy", "transport", "chemistry", "the monarchy", "video games", "fashion", "tennis",
                 "water supply", "taxation", "mythology", "railways", "painting", "astronomy", "labour unions",
                 "opera", "shipping")


def aggregation_questions(family: Family, n: int, seed: int = 13) -> list[str]:
    """`n` distinct prompts of one family (fewer when the family runs out), in a seeded order."""
    templates, scopes, subjects = ((TRAIN_TEMPLATES, TRAIN_SCOPES, TRAIN_SUBJECTS) if family == "train"
                                   else (TEST_TEMPLATES, TEST_SCOPES, TEST_SUBJECTS))
    every = sorted({t.format(scope=sc, subject=su) for t in templates for sc in scopes for su in subjects})
    random.Random(f"{family}:{seed}").shuffle(every)
    return [q[0].upper() + q[1:] for q in every[:n]]

"""The planted-facts corpus of the documents tests: 50 documents of shared filler, each with one fact about an
invented place or person (so only that document holds it), and questions worded differently from the facts. Ten
kinds of fact, five documents each: the other four documents of a kind share the question's common words, so the
ranking must find the one whose rare name matches."""
import os
import random

FILLER = [
    "The committee met on Tuesday to review the minutes of the previous meeting and agreed to postpone the vote.",
    "Weather in the region has been mild this season, with occasional rain in the afternoons and cool nights.",
    "Several residents asked for better lighting along the main road, and the council promised to look into it.",
    "The quarterly report shows steady progress, although a few items remain open and will be revisited later.",
    "Volunteers cleaned the park on Saturday morning and collected more than twenty bags of litter.",
    "A new bakery opened near the station; its bread sold out before noon on the first day.",
    "The school term ends in three weeks, after which the building will be repainted over the summer.",
    "Local musicians performed in the square, and the crowd stayed until the lamps were lit.",
    "Traffic was diverted for two days while the water main under the high street was repaired.",
    "The museum extended its opening hours on Thursdays to let people visit after work.",
    "Most of the discussion concerned the budget, which must be approved before the end of the month.",
    "An old photograph of the harbour was found in the attic and donated to the historical society.",
    "The football club is looking for a new coach after the last one moved away in the spring.",
    "Farmers reported a good harvest of apples, though the pears were smaller than usual.",
    "The printing of the newsletter was delayed because the paper supplier ran out of stock.",
    "Children from the primary school planted a row of oak saplings along the river path.",
]
SYLLABLES = ["var", "bris", "tol", "mek", "ran", "dor", "vel", "quin", "sar", "lum", "ost", "pel", "gar", "wyn",
             "zor", "hal", "brek", "tam", "fen", "cor"]
PLACE_ENDS = ["holm", "vale", "wick", "stead", "mouth", "ford", "bury", "thorpe"]
FIRST = ["Odile", "Bastian", "Marit", "Casimir", "Ysolde", "Teodor", "Linnea", "Ansel", "Perpetua", "Joaquin",
         "Rosalind", "Evander", "Ilse", "Matthias", "Sunniva", "Lazar", "Henrike", "Oswin", "Greta", "Florian"]
LAST = ["Brask", "Quillon", "Ferreby", "Tasken", "Morrow", "Halvard", "Prideaux", "Wendt", "Olufsen", "Carrick"]
FLAVOURS = ["juniper", "cardamom", "bergamot", "hazelnut", "elderflower", "cinnamon", "rosehip", "liquorice"]
WORDS = ["marigold", "copperfield", "nightjar", "tamarind", "bluebottle", "quicksilver", "driftwood", "saffron"]
RIVERS = ["Amber", "Silt", "Heron", "Willow", "Flint", "Otter", "Moss", "Reed"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

# (the fact, a question, another wording of the question)
KINDS = [
    ("The lighthouse on {place} island was built in {year} by the engineer {person}.",
     "Who constructed the {place} lighthouse, and when?", "In what year did the {place} light go up?"),
    ("{person} prefers a smoked {flavour} tea grown in the hills above {place}.",
     "Which tea does {person} like best?", "What kind of tea is {person}'s favourite?"),
    ("The code that opens the archive room in {place} town hall is {word}.",
     "What do I type to get into the {place} archive room?", "Which password unlocks the archive at {place}?"),
    ("Project {word} cut the nightly build of the {place} pipeline from forty minutes to {num} minutes.",
     "How long does the {place} build take since project {word}?", "What did project {word} do for {place}?"),
    ("The {place} choir rehearses every {day} evening in the old grain hall.",
     "On which day does the choir of {place} practise?", "When do {place}'s singers meet to rehearse?"),
    ("{person} keeps {num} goats on a smallholding outside {place}.",
     "How many goats does {person} own?", "Does {person} have any animals, and how many?"),
    ("The footbridge across the {river} river at {place} is {num} metres long.",
     "What is the length of the bridge over the {river} in {place}?", "How far does the {place} footbridge span?"),
    ("The {place} library lends its rare maps only to members who have held a card for {num} years.",
     "For how many years must I be a member before {place}'s library lends me rare maps?",
     "What are the rules for borrowing old maps in {place}?"),
    ("In {place} the recycling lorry collects glass bottles on the first {day} of every month.",
     "When is glass picked up for recycling in {place}?", "Which day should {place} residents put out glass?"),
    ("The traditional {place} stew needs {num} cloves of garlic and a cup of {flavour} cider.",
     "How much garlic goes into a {place} stew?", "What is in the {place} stew recipe?"),
]


def build(folder: str, seed: int = 35) -> list[dict]:
    """Write the 50 documents into `folder` (doc-00.md ... doc-49.md); returns the questions, each
    {"question", "fact", "file"} (60: one per document, and the second wording for the first of each kind)."""
    rng = random.Random(seed)
    places, people = set(), set()
    while len(places) < 50:
        places.add((rng.choice(SYLLABLES) + rng.choice(SYLLABLES)).capitalize() + rng.choice(PLACE_ENDS))
    while len(people) < 50:
        people.add(f"{rng.choice(FIRST)} {rng.choice(LAST)}")
    places, people = sorted(places), sorted(people)
    rng.shuffle(places)
    rng.shuffle(people)
    questions = []
    for i in range(50):
        fact_t, q1, q2 = KINDS[i % len(KINDS)]
        values = {"place": places[i], "person": people[i], "year": 1850 + rng.randrange(120),
                  "flavour": rng.choice(FLAVOURS), "word": rng.choice(WORDS) + str(rng.randrange(10, 99)),
                  "num": 3 + rng.randrange(90), "river": rng.choice(RIVERS), "day": rng.choice(DAYS)}
        fact = fact_t.format(**values)
        paragraphs = []
        for _ in range(rng.randrange(5, 9)):
            sentences = rng.sample(FILLER, rng.randrange(2, 4))
            if rng.random() < 0.3:            # a mention of another document's place, without its fact
                sentences.append(f"A visitor from {places[rng.randrange(50)]} said the same of home.")
            paragraphs.append(" ".join(sentences))
        paragraphs.insert(rng.randrange(1, len(paragraphs)), fact)
        name = f"doc-{i:02d}.md"
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(f"# Notes {i}\n\n" + "\n\n".join(paragraphs) + "\n")
        questions.append({"question": q1.format(**values), "fact": fact, "file": name})
        if i < len(KINDS):
            questions.append({"question": q2.format(**values), "fact": fact, "file": name})
    return questions


def hit_rate(index, questions: list[dict], k: int = 3, embedder=None) -> float:
    """The share of questions whose fact is whole in one of the top-k passages."""
    from app.documents.retrieve import search
    hits = 0
    for q in questions:
        if any(q["fact"] in h.text for h in search(index, q["question"], k=k, embedder=embedder)):
            hits += 1
    return hits / len(questions)

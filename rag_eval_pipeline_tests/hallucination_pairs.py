"""Question-answer pairs of our own with a right and a hallucinated answer, in the labelled benchmark's record form.

Each pair gives a question, the knowledge it is answered from, the right answer and a hallucinated one, as
the public HaluEval QA set does (../shared/benchmarks/halueval_qa_dev.jsonl); the people, places and
figures are made up. `kind` says how the hallucinated answer goes wrong:

- entity: names someone or something the knowledge never mentions;
- number: a wrong year, count or amount, in digits or in words;
- yes_no: the wrong bare yes or no;
- negation: adds or drops a "not";
- added_claim: the right subject with a claim the knowledge does not make;
- other_entity: names another entity that the knowledge does mention, but not as the answer (the hardest kind:
  every word of the answer is in the knowledge).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pair:
    kind: str
    question: str
    knowledge: str
    right: str
    hallucinated: str


PAIRS = [
    # --- entity -------------------------------------------------------------------------------------------
    Pair(
        "entity",
        "Who planted the first vines at the Corrado estate?",
        "The Corrado estate lies on the south bank of the river Lenn. Its first vines were planted by Ottilie "
        "Brandt in 1921, and her nephew later built the press house.",
        "Ottilie Brandt",
        "Margarethe Voss",
    ),
    Pair(
        "entity",
        "Which engineer designed the Tessaly viaduct?",
        "The Tessaly viaduct carries the railway across the Marl valley on eleven stone arches. It was designed "
        "by the engineer Rufus Callander and opened to trains in 1887.",
        "Rufus Callander",
        "Isambard Frome",
    ),
    Pair(
        "entity",
        "In which town was the composer of the Lantern Suite born?",
        "The Lantern Suite was written by Edda Rasmussen. Rasmussen was born in the fishing town of Skarvik and "
        "studied in Copenhagen.",
        "Skarvik",
        "Bergholm",
    ),
    Pair(
        "entity",
        "What is the name of the ferry that links Westhaven with Orrin Island?",
        "Two ferries of the Kestrel Line sail between Westhaven and Orrin Island. The larger is called the "
        "Marigold; the smaller one only runs in summer.",
        "the Marigold",
        "the Seahorse",
    ),
    Pair(
        "entity",
        "Which university did the founder of Pellam Instruments attend?",
        "Pellam Instruments was founded by Agnes Pellam in 1949. She had studied physics at Dunmore University "
        "before working for the national weather office.",
        "Dunmore University",
        "Ravensworth College",
    ),
    Pair(
        "entity",
        "What language was the first Orrin Island newspaper printed in?",
        "The Orrin Gazette, the island's first newspaper, was printed in Gaelic from 1861 until 1890, when it "
        "moved to English.",
        "Gaelic",
        "Norwegian",
    ),
    Pair(
        "entity",
        "Who coached the Harlow Rovers when they won their first league title?",
        "The Harlow Rovers won their first league title in 1974. Their coach that season was Dermot Quill, a "
        "former goalkeeper.",
        "Dermot Quill",
        "Stanley Arkwright",
    ),
    Pair(
        "entity",
        "Which company built the tugboat Brisk?",
        "The tugboat Brisk was built by the Halden yard in Saltvik in 1936 and served the port of Keller for "
        "forty years.",
        "the Halden yard",
        "Morrow and Sons",
    ),
    # --- number -------------------------------------------------------------------------------------------
    Pair(
        "number",
        "In what year did the Kestrel Line begin its ferry service to Orrin Island?",
        "The Kestrel Line began sailing to Orrin Island in 1958. Its ferries still leave from the old stone pier "
        "at Westhaven.",
        "1958",
        "1962",
    ),
    Pair(
        "number",
        "How many arches does the Tessaly viaduct have?",
        "The Tessaly viaduct carries the railway across the Marl valley on eleven stone arches. It was designed "
        "by the engineer Rufus Callander.",
        "eleven",
        "fourteen",
    ),
    Pair(
        "number",
        "How tall is the lighthouse on Orrin Island?",
        "The lighthouse on Orrin Island stands 38 metres tall and was first lit in 1874.",
        "38 metres",
        "52 metres",
    ),
    Pair(
        "number",
        "How many containers does Port Keller handle in a week?",
        "Port Keller handles about 4,500 containers a week. Its harbour master is Anselm Dorrit.",
        "about 4,500 containers",
        "about 7,200 containers",
    ),
    Pair(
        "number",
        "When did Agnes Pellam found her instrument company?",
        "Pellam Instruments was founded by Agnes Pellam in 1949 in a workshop behind her father's bakery.",
        "in 1949",
        "in 1953",
    ),
    Pair(
        "number",
        "How many varieties of pear grew in the Millbrook orchard?",
        "The Millbrook orchard was planted by Teodora Vance in 1932. She grew twelve varieties of pear there.",
        "twelve",
        "twenty",
    ),
    Pair(
        "number",
        "How long is the breakwater at Westhaven?",
        "The breakwater at Westhaven runs 640 metres into the bay and shelters forty moorings.",
        "640 metres",
        "480 metres",
    ),
    # --- yes or no ----------------------------------------------------------------------------------------
    Pair(
        "yes_no",
        "Did Rufus Callander design the Tessaly viaduct?",
        "The Tessaly viaduct was designed by the engineer Rufus Callander and opened to trains in 1887.",
        "yes",
        "no",
    ),
    Pair(
        "yes_no",
        "Did Teodora Vance plant the Millbrook orchard?",
        "The Millbrook orchard was planted by Teodora Vance in 1932.",
        "yes",
        "no",
    ),
    Pair(
        "yes_no",
        "Did Edda Rasmussen write the Lantern Suite?",
        "The Lantern Suite was written by Edda Rasmussen, who was born in Skarvik.",
        "yes",
        "no",
    ),
    Pair(
        "yes_no",
        "Was the Orrin Gazette printed in Gaelic?",
        "The Orrin Gazette was printed in Gaelic from 1861 until 1890.",
        "yes",
        "no",
    ),
    # --- negation -----------------------------------------------------------------------------------------
    Pair(
        "negation",
        "Is the maritime museum at Harlow Quay open on Sundays?",
        "The maritime museum at Harlow Quay is not open on Sundays. Entry is free for children under twelve.",
        "The maritime museum at Harlow Quay is not open on Sundays.",
        "The maritime museum at Harlow Quay is open on Sundays.",
    ),
    Pair(
        "negation",
        "Can cars drive onto the Marigold?",
        "The Marigold carries foot passengers and bicycles. Cars are not allowed on board.",
        "Cars are not allowed on the Marigold.",
        "Cars are allowed on the Marigold.",
    ),
    Pair(
        "negation",
        "Was the Tessaly viaduct damaged in the flood of 1903?",
        "The flood of 1903 washed away two road bridges in the Marl valley. The Tessaly viaduct was not damaged.",
        "The Tessaly viaduct was not damaged in the flood of 1903.",
        "The Tessaly viaduct was damaged in the flood of 1903.",
    ),
    Pair(
        "negation",
        "Does the Halden yard still build ships?",
        "The Halden yard built tugs and coasters until 1971. It no longer builds ships and now repairs yachts.",
        "The Halden yard no longer builds ships.",
        "The Halden yard still builds ships.",
    ),
    # --- an added claim -----------------------------------------------------------------------------------
    Pair(
        "added_claim",
        "Who planted the Millbrook orchard?",
        "The Millbrook orchard was planted by Teodora Vance in 1932. She grew twelve varieties of pear there.",
        "Teodora Vance planted it in 1932.",
        "Teodora Vance planted it after returning from the war in France.",
    ),
    Pair(
        "added_claim",
        "Who is the harbour master of Port Keller?",
        "Port Keller handles about 4,500 containers a week. Its harbour master is Anselm Dorrit.",
        "Anselm Dorrit is the harbour master.",
        "Anselm Dorrit, a former submarine captain, is the harbour master.",
    ),
    Pair(
        "added_claim",
        "Where did Agnes Pellam study?",
        "Agnes Pellam studied physics at Dunmore University before working for the national weather office.",
        "She studied physics at Dunmore University.",
        "She studied physics at Dunmore University on a scholarship from the navy.",
    ),
    Pair(
        "added_claim",
        "What does the Halden yard do now?",
        "The Halden yard built tugs and coasters until 1971. It now repairs yachts.",
        "It repairs yachts.",
        "It repairs yachts and builds racing canoes for the Olympic team.",
    ),
    # --- another entity of the knowledge ------------------------------------------------------------------
    Pair(
        "other_entity",
        "Who built the press house on the Corrado estate?",
        "The first vines of the Corrado estate were planted by Ottilie Brandt in 1921. Her nephew, Anton "
        "Brandt, later built the press house.",
        "Anton Brandt",
        "Ottilie Brandt",
    ),
    Pair(
        "other_entity",
        "Which ferry of the Kestrel Line only runs in summer?",
        "Two ferries of the Kestrel Line sail to Orrin Island: the Marigold, which runs all year, and the "
        "Petrel, which only runs in summer.",
        "the Petrel",
        "the Marigold",
    ),
    Pair(
        "other_entity",
        "In which city did Edda Rasmussen study?",
        "Edda Rasmussen was born in the fishing town of Skarvik and studied in Copenhagen.",
        "Copenhagen",
        "Skarvik",
    ),
    Pair(
        "other_entity",
        "Which coach followed Dermot Quill at the Harlow Rovers?",
        "Dermot Quill coached the Harlow Rovers to their first title in 1974. He was followed in 1979 by "
        "Owen Tarrant, who had played under him.",
        "Owen Tarrant",
        "Dermot Quill",
    ),
]


def records() -> list[dict]:
    """Two records per pair (label 1: the right answer, label 0: the hallucinated one), sharing a pair_id."""
    out = []
    for number, pair in enumerate(PAIRS):
        for label, answer in ((1, pair.right), (0, pair.hallucinated)):
            out.append(
                {
                    "id": f"own-qa-{number}-{'right' if label else 'hallucinated'}",
                    "question": pair.question,
                    "contexts": [pair.knowledge],
                    "answer": answer,
                    "label": label,
                    "pair_id": f"own-qa-{number}",
                    "meta": {"kind": pair.kind},
                }
            )
    return out

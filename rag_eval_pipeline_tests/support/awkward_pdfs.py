"""Awkward documents of our own for the ingestion tests, written into a folder once per test session.

The tests of PDF reading, page furniture and chunking need the kinds of file a tenant really drops in
a folder: running headers and footers, page numbers in several styles, download stamps and watermarks,
two columns with words hyphenated across lines, right-to-left text, code listings, tables, an image-only
page, an outline, an encrypted file, and files that cannot be read at all. Public PDFs of that kind bring
licences and cannot be checked against a known source text, so we write the text ourselves and lay out
every line where we want it: a test knows exactly which line is furniture and which is body.

    build(folder) -> AwkwardCorpus   # folder/furniture, folder/edge, folder/bad
    python -m rag_eval_pipeline_tests.support.awkward_pdfs OUTPUT_FOLDER

Text is deterministic (fixed seeds, a fixed creation date); the encrypted files are not byte for byte,
as AES draws a fresh initialisation vector. Right-to-left text needs a font with Arabic and Hebrew code
points, and no such font can be assumed on a fresh machine: the module builds one with fontTools (which
fpdf2 depends on) whose glyphs are plain boxes. What the tests read is the text layer, as from any PDF.
Right-to-left lines are written in visual order, as word processors write them; pypdf reads them back in
logical order.
"""

from __future__ import annotations

import io
import random
import sys
import zipfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from fpdf import FPDF
from PIL import Image, ImageDraw
from pypdf import PdfWriter

FIXED_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)
AUTHOR = "Halcyon Freight test corpus (our own text)"
PAGE_WIDTH, PAGE_HEIGHT = 210.0, 297.0
MARGIN = 20.0
LEADING = 5.6
BODY_SIZE = 10.5

# --- the furniture each document carries (the tests import these) ------------------------------------

CHRONICLE_TITLE = "The Harbour Chronicle"
CHRONICLE_PAGES = 24
WATERMARK = "Made with a trial copy of Quillpress. Buy a licence to remove this line."
BROUGHT_BY = "Brought to you by the harbour library"
WATERMARK_PAGES = (4, 11, 18)  # 3 of 24 pages: as rare as furniture may be
WORD_LISTS_HEADER = "Long vowel word lists {n}"
WORD_LISTS_CREDIT = "Word lists by the Halcyon Reading Club, free to copy and share under the club's open reading"
WORD_LISTS_CREDIT_END = "Licence"
WORD_LISTS_PAGES = 12
WORD_LISTS_REVIEW_PAGES = (3, 6, 9, 12)
ARTICLE_STAMP = "Downloaded from https://quaystudies.example.org on May 4, 2023"
# The journal's footers on even pages, each read as one line with the stamp: no one text repeats on three pages.
ARTICLE_FOOTERS = {2: "QUAY STUDIES, VOL. 41", 4: "HARBOUR ECONOMICS", 6: "QUAY STUDIES, VOL. 41"}
ARTICLE_FIRST_PAGE_NUMBER = 311
ARTICLE_PAGES = 6
AGREEMENT_HEADER = "Quay Sensor Network: Open Data Terms"
AGREEMENT_SUBHEADER = "Prepared by the Port of Keller data office and Halcyon Freight, Rotterdam"
AGREEMENT_PAGES = 7
STYLE_GUIDE_TITLE = "Writing for the Quay"
STYLE_GUIDE_PAGES = 10
REPORT_HEADER = "Port of Keller Annual Report 2024"
REPORT_FRONT_MATTER = ["i", "ii", "iii", "iv"]
REPORT_BODY_PAGES = 8
STORY_TITLE = "The Tide Clock"
STORY_REFRAIN = "Down on the quay the tide clock struck the hour again."

# Ports of a sea of our own: name, tonnage (million t), area (km2), harbour town, languages.
PORT_TABLE = [
    ("Ostmark", "8.9", "83,879", "Lindau", "German"),
    ("Varnholm", "5.5", "338,424", "Saltvik", "Finnish, Swedish"),
    ("Brisa", "10.3", "92,212", "Cala Norte", "Portuguese"),
    ("Kellerhaven", "17.4", "41,543", "Keller Point", "Dutch"),
    ("Tarnow Bay", "2.1", "20,273", "Lesko", "Polish"),
    ("Solvik", "5.8", "42,933", "Aalborg Quay", "Danish"),
]
TRAFFIC_TABLE = [
    "Containers 4,512 4,730 4,981",
    "Bulk grain 1,204 1,187 1,362",
    "Timber 655 702 719",
    "Ferry passengers 88,410 91,006 94,775",
    "Cruise calls 41 47 52",
]

# Right-to-left text of our own: short sentences about a harbour, in Arabic and in Hebrew.
ARABIC_SENTENCES = [
    "يفتح الميناء أبوابه في الساعة السادسة صباحا كل يوم.",
    "تصل السفن من الشمال قبل الظهر وتغادر بعد غروب الشمس.",
    "يسجل مدير الميناء كل سفينة في دفتر كبير.",
    "يعمل الحمالون في نوبات قصيرة عندما يكون الجو حارا.",
    "تحمل الرافعات الحاويات من السفن إلى الرصيف.",
    "يغلق الرصيف الشرقي أيام الجمعة للصيانة.",
    "يطلب الربان مرشدا عندما يكون الضباب كثيفا.",
    "تدفع كل سفينة رسوما حسب وزنها ومدة بقائها.",
    "يراقب الحارس المنارة طوال الليل.",
    "ينتظر الصيادون المد قبل أن يبحروا.",
]
HEBREW_SENTENCES = [
    "הנמל נפתח בשש בבוקר.",
    "האוניות מגיעות מהצפון לפני הצהריים.",
    "מנהל הנמל רושם כל אונייה בספר גדול.",
    "העגורנים מעבירים את המכולות אל הרציף.",
]
# A line that changes direction: pypdf's word order across the change is its own guess.
MIXED_DIRECTION_LINE = "تستخدم إدارة الميناء برنامج Python لحساب الرسوم."

CODE_LISTING = [
    "function berthFee(tonnage, hours) {",
    "  const rate = 0.42;",
    "  return tonnage * rate * Math.ceil(hours / 24);",
    "}",
    "console.log(berthFee(1200, 30));",
]
FORMULA_LINES = ["fee = t * r * ceil(h / 24)", "d = v2 / (2 a)"]
OUTLINE_SECTIONS = ["Scope of the rules", "Mooring and berths", "Cargo handling", "Fire safety", "Leaving the port"]


@dataclass
class AwkwardCorpus:
    root: Path
    furniture: Path
    edge: Path
    bad: Path
    # words the two-column layout broke at a line end: (head, tail) as in "adip-" / "iscing"
    hyphenated: list[tuple[str, str]] = field(default_factory=list)
    # the prose of the two-column document, paragraph by paragraph, in reading order
    column_paragraphs: list[str] = field(default_factory=list)


def build(root: Path) -> AwkwardCorpus:
    root = Path(root)
    corpus = AwkwardCorpus(root, root / "furniture", root / "edge", root / "bad")
    for folder in (corpus.furniture, corpus.edge, corpus.bad):
        folder.mkdir(parents=True, exist_ok=True)
    font = _box_font(root / "fonts" / "quayside-boxes.ttf")
    _chronicle(corpus.furniture / "harbour-chronicle.pdf")
    _word_lists(corpus.furniture / "word-lists.pdf")
    _article(corpus.furniture / "quay-studies-article.pdf")
    _agreement(corpus.furniture / "data-sharing-agreement.pdf")
    _style_guide(corpus.furniture / "style-guide.pdf")
    _annual_report(corpus.furniture / "annual-report.pdf")
    _story(corpus.furniture / "story.pdf")
    _chapters(corpus.furniture / "chapters.pdf")
    corpus.hyphenated, corpus.column_paragraphs = _two_columns(corpus.edge / "two-columns.pdf")
    _right_to_left(corpus.edge / "right-to-left.pdf", font)
    _code_and_formula(corpus.edge / "code-and-formula.pdf")
    _figure_page(corpus.edge / "figure-page.pdf")
    _outline(corpus.edge / "outline.pdf")
    _encrypt(corpus.edge / "two-columns.pdf", corpus.edge / "owner-password-only.pdf", user_password="")
    _encrypt(corpus.furniture / "story.pdf", corpus.edge / "locked.pdf", user_password="harbour-user")
    _bad_files(corpus)
    return corpus


# --- prose of our own ----------------------------------------------------------------------------------

_SUBJECTS = [
    "the harbour master",
    "the night pilot",
    "a tug from the north quay",
    "the crane crew",
    "Mira Okafor",
    "the customs officer",
    "the old ferry",
    "a coaster from Varnholm",
    "the lock keeper",
    "the dock foreman",
    "two deckhands",
    "the lighthouse keeper",
    "the cook of the dredger",
    "a boy with a fishing line",
    "the signal clerk",
    "Anselm Dorrit",
    "the grain inspector",
    "the tally clerks",
    "the ferry captain",
    "a grey gull",
]
_ACTIONS = [
    "checked the mooring lines",
    "waited for the tide",
    "wrote the arrival in the ledger",
    "called the pilot boat",
    "painted the bollards",
    "counted the empty pallets",
    "mended the rope fender",
    "signalled the ferry",
    "swept the cobbles",
    "rang the fog bell",
    "lit the lamps",
    "unloaded sacks of salt",
    "watched the barometer",
    "carried the mail to the office",
    "tightened the crane cable",
    "read the weather report aloud",
    "stacked the lobster pots",
    "argued about the harbour fees",
    "measured the depth of the channel",
    "raised the storm flag",
]
_PLACES = [
    "at berth {n}",
    "beside the grain silo",
    "on the east mole",
    "under the signal mast",
    "near the fish market",
    "by the dry dock",
    "along the timber wharf",
    "outside the customs house",
    "at the end of the breakwater",
    "in the lee of the warehouse",
    "on the ferry ramp",
    "below the lighthouse",
]
_TIMES = [
    "before dawn",
    "after the second bell",
    "in the grey afternoon",
    "while the fog lifted",
    "as the tide turned",
    "just after midnight",
    "during the long shift",
    "before the storm came",
    "on the first day of spring",
    "when the ferry was late",
]

_PARTIES = [
    "the licensee",
    "the Port of Keller",
    "each party",
    "a data user",
    "the data office",
    "the publisher",
    "any person who receives the readings",
    "the sensor operator",
]
_DUTIES = [
    "may copy and share the sensor readings",
    "shall name the Quay Sensor Network as the source",
    "must not sell the raw readings on their own",
    "may publish adapted readings",
    "shall keep a record of every adaptation",
    "must not suggest that the port endorses the use",
    "may combine the readings with other data",
    "shall remove personal data before sharing",
    "must pass these terms on with every copy",
    "may stop sharing at any time",
]
_CONDITIONS = [
    "provided that these terms are kept",
    "unless the data office agrees in writing",
    "for as long as this licence lasts",
    "in any medium or format",
    "within thirty days of a request",
    "to the extent the law allows",
    "without any further permission",
]


def _sentences(rng: random.Random, count: int) -> list[str]:
    sentences = []
    for _ in range(count):
        subject, action = rng.choice(_SUBJECTS), rng.choice(_ACTIONS)
        place = rng.choice(_PLACES).format(n=rng.randint(2, 40))
        time_of_day = rng.choice(_TIMES)
        if rng.random() < 0.35:
            other = rng.choice([s for s in _SUBJECTS if s != subject])
            sentence = f"{time_of_day}, {subject} {action} {place} while {other} {rng.choice(_ACTIONS)}."
        else:
            sentence = f"{subject} {action} {place} {time_of_day}."
        sentences.append(sentence[0].upper() + sentence[1:])
    return sentences


def _legal_sentences(rng: random.Random, count: int) -> list[str]:
    sentences = []
    for _ in range(count):
        sentence = f"{rng.choice(_PARTIES)} {rng.choice(_DUTIES)} {rng.choice(_CONDITIONS)}."
        sentences.append(sentence[0].upper() + sentence[1:])
    return sentences


# --- layout: every line placed by hand ------------------------------------------------------------------


@dataclass(frozen=True)
class Styled:
    """A line in another font than the body's: a heading, a code line."""

    text: str
    style: str = "B"
    size: float = 13.0
    family: str = "helvetica"


def _new_pdf(title: str | None = None) -> FPDF:
    pdf = FPDF(format="A4")
    pdf.set_creation_date(FIXED_DATE)
    pdf.set_author(AUTHOR)
    if title:
        pdf.set_title(title)
    pdf.set_auto_page_break(False)
    pdf.set_font("helvetica", size=BODY_SIZE)
    return pdf


def _write_line(pdf: FPDF, x: float, y: float, line) -> None:
    if isinstance(line, Styled):
        pdf.set_font(line.family, line.style, line.size)
        pdf.text(x, y, line.text)
        pdf.set_font("helvetica", "", BODY_SIZE)
    else:
        pdf.text(x, y, line)


def _page(pdf: FPDF, top: list, body: list, bottom: list) -> None:
    """One page: header lines from the top margin, body lines below them, footer lines up from the bottom."""
    pdf.add_page()
    y = MARGIN
    for line in top:
        _write_line(pdf, MARGIN, y, line)
        y += LEADING
    y += LEADING if top else 0
    for line in body:
        _write_line(pdf, MARGIN, y, line)
        y += LEADING
    bottom_y = PAGE_HEIGHT - MARGIN - LEADING * (len(bottom) - 1)
    assert y <= bottom_y, "body runs into the footer"
    for line in bottom:
        _write_line(pdf, MARGIN, bottom_y, line)
        bottom_y += LEADING


def _wrap(pdf: FPDF, text: str, width: float, hyphenate: bool = False) -> tuple[list[str], list[tuple[str, str]]]:
    """Greedy line breaking at the current font; with hyphenate, a long word that does not fit is broken."""
    lines, broken, line = [], [], ""
    for word in text.split():
        candidate = f"{line} {word}" if line else word
        if pdf.get_string_width(candidate) <= width:
            line = candidate
            continue
        split = _hyphen_split(pdf, line, word, width) if hyphenate and line else None
        if split:
            head, tail = split
            lines.append(f"{line} {head}-")
            broken.append((head, tail))
            line = tail
            continue
        if line:
            lines.append(line)
        line = word
    if line:
        lines.append(line)
    return lines, broken


# Where our long words may break, as a typesetter would break them; other words are never broken.
_HYPHENATION = {
    word.replace("-", ""): word
    for word in (
        "light-house break-water har-bour bol-lards of-fi-cer moor-ing dredg-er chan-nel cus-toms weath-er "
        "tight-ened mid-night ar-ri-val deck-hands ba-rom-e-ter in-spec-tor ware-house sig-nalled lob-ster "
        "af-ter-noon mea-sured pal-lets fish-ing mar-ket tim-ber fore-man cap-tain sig-nal coast-er keep-er "
        "ev-ery un-loaded"
    ).split()
}


def _hyphen_split(pdf: FPDF, line: str, word: str, width: float) -> tuple[str, str] | None:
    letters = word.rstrip(".,;:")
    syllables = _HYPHENATION.get(letters.lower(), letters).split("-")
    cuts = [sum(len(s) for s in syllables[:i]) for i in range(1, len(syllables))]
    for cut in reversed(cuts):  # the longest head that fits
        if pdf.get_string_width(f"{line} {word[:cut]}-") <= width:
            return word[:cut], word[cut:]
    return None


def _paragraph_lines(pdf: FPDF, sentences: list[str], width: float = PAGE_WIDTH - 2 * MARGIN) -> list[str]:
    return _wrap(pdf, " ".join(sentences), width)[0]


def _body_pages(pdf: FPDF, rng: random.Random, pages: int, lines_per_page: int) -> list[list]:
    """Pages of wrapped prose, paragraph after paragraph, each page exactly lines_per_page lines."""
    lines: list = []
    while len(lines) < pages * lines_per_page:
        lines += _paragraph_lines(pdf, _sentences(rng, rng.randint(3, 6)))
    return [lines[i * lines_per_page : (i + 1) * lines_per_page] for i in range(pages)]


# --- documents with page furniture ----------------------------------------------------------------------


def _chronicle(path: Path) -> None:
    """Running title atop every page, "N of 24" below it from page 2, a two-line watermark on three pages."""
    pdf = _new_pdf(CHRONICLE_TITLE)
    rng = random.Random(1)
    bodies = _body_pages(pdf, rng, CHRONICLE_PAGES, 34)
    # The title quoted in a sentence of the body stays: only the line standing alone is furniture.
    bodies[4][12] = f"Everyone in Keller read {CHRONICLE_TITLE} on the evening ferry."
    bodies[0][:4] = [
        "A. K. Marlow",
        "This chronicle was set and printed by the Quayside Press for the harbour",
        "library at Keller Point. Ask for new editions at the ferry office.",
    ]
    for number, body in enumerate(bodies, start=1):
        top = [CHRONICLE_TITLE] + ([f"{number} of {CHRONICLE_PAGES}"] if number > 1 else [])
        bottom = [BROUGHT_BY, WATERMARK] if number in WATERMARK_PAGES else []
        _page(pdf, top, body, bottom)
    pdf.output(str(path))


def _word_lists(path: Path) -> None:
    """A three-line header on every page (numbered with the page, a credit, the credit's last word) over word lists;
    a one-word line ends a third of the pages."""
    pdf = _new_pdf()  # no /Title: the title is read from the first page, where the header must not win
    rng = random.Random(2)
    onsets = [
        "b",
        "c",
        "d",
        "f",
        "g",
        "h",
        "j",
        "l",
        "m",
        "n",
        "p",
        "r",
        "s",
        "t",
        "v",
        "w",
        "bl",
        "br",
        "cl",
        "cr",
        "dr",
        "fl",
        "fr",
        "gl",
        "gr",
        "pl",
        "pr",
        "sl",
        "sn",
        "sp",
        "st",
        "tr",
        "sh",
        "ch",
        "th",
        "wh",
    ]
    rimes = {
        "a_e": ["ake", "ale", "ame", "ane", "ape", "ate", "ave", "ace", "ade", "age"],
        "i_e": ["ike", "ile", "ime", "ine", "ipe", "ite", "ive", "ide", "ice", "ife"],
        "o_e": ["oke", "ole", "ome", "one", "ope", "ote", "ove", "ode", "obe", "ose"],
        "u_e": ["ule", "une", "ute", "ube", "use", "uke", "ude", "uce"],
    }
    seen: set[str] = set()
    lines: list = [
        Styled("Silent E Drills"),
        *_paragraph_lines(
            pdf,
            [
                "These lists help a reader hear how a silent e at the end of a word makes the vowel say its name.",
                "Read each line aloud, then cover it and spell three of its words from memory.",
                "Some words on the lists are made up on purpose: a reader who can sound them out has learnt the rule.",
            ],
        ),
    ]
    while len(lines) < WORD_LISTS_PAGES * 30:
        for pattern, endings in rimes.items():
            lines.append(Styled(f"Words with {pattern}", size=11))
            for rime in endings:
                words = " ".join(onset + rime for onset in sorted(rng.sample(onsets, 7)))
                if words not in seen:
                    seen.add(words)
                    lines.append(words)
    for number in range(1, WORD_LISTS_PAGES + 1):
        body = lines[(number - 1) * 30 : number * 30]
        if number in WORD_LISTS_REVIEW_PAGES:
            body.append(Styled("Review", size=11))  # one word at the page's foot, on too few pages to be furniture
        _page(pdf, [WORD_LISTS_HEADER.format(n=number), WORD_LISTS_CREDIT, WORD_LISTS_CREDIT_END], body, [])
    pdf.output(str(path))


def _article(path: Path) -> None:
    """A download stamp at the foot of every page; odd pages carry a page number above it, even pages a
    footer of the journal on the stamp's own baseline, so that pypdf reads the two as one line."""
    pdf = _new_pdf()
    rng = random.Random(3)
    bodies = _body_pages(pdf, rng, ARTICLE_PAGES, 36)
    bodies[0][:5] = [
        Styled("The Commons of the Quay", size=16),
        "Ilse Brandvold",
        "A shared quay has no technical fix; it asks for an extension of the harbour's rules.",
        "Every captain gains by mooring a little longer, and the quay as a whole loses.",
    ]
    for number, body in enumerate(bodies, start=1):
        pdf.add_page()
        y = MARGIN
        for line in body:
            _write_line(pdf, MARGIN, y, line)
            y += LEADING
        foot = PAGE_HEIGHT - MARGIN
        if number % 2:
            pdf.text(PAGE_WIDTH / 2, foot - LEADING, str(ARTICLE_FIRST_PAGE_NUMBER + number - 1))
            pdf.text(MARGIN, foot, ARTICLE_STAMP)
        else:
            footer = ARTICLE_FOOTERS[number]
            pdf.text(MARGIN, foot, footer)
            pdf.text(MARGIN + pdf.get_string_width(footer) + 12, foot, ARTICLE_STAMP)
    pdf.output(str(path))


def _agreement(path: Path) -> None:
    """A three-line header block on every page: the terms' name, who prepared them, "Page N of 7"."""
    pdf = _new_pdf()
    rng = random.Random(4)
    lines: list = [Styled("Open Data Licence for Harbour Sensor Readings", size=14)]
    for section, name in enumerate(
        ["Definitions", "Scope", "Conditions", "Sharing", "Term and ending", "Disclaimer", "Other terms"], start=1
    ):
        lines.append(Styled(f"Section {section} {name}", size=11))
        for letter in "abcde":
            lines += _paragraph_lines(pdf, [f"{letter}. " + " ".join(_legal_sentences(rng, rng.randint(2, 4)))])
    per_page = -(-len(lines) // AGREEMENT_PAGES)
    for number in range(1, AGREEMENT_PAGES + 1):
        header = [AGREEMENT_HEADER, AGREEMENT_SUBHEADER, f"Page {number} of {AGREEMENT_PAGES}"]
        _page(pdf, header, lines[(number - 1) * per_page : number * per_page], [])
    pdf.output(str(path))


def _style_guide(path: Path) -> None:
    """The page number alone as the first line of every page; numbered chapters that are not furniture."""
    pdf = _new_pdf(STYLE_GUIDE_TITLE)
    rng = random.Random(5)
    bodies = _body_pages(pdf, rng, STYLE_GUIDE_PAGES, 32)
    bodies[0][:4] = [
        Styled(STYLE_GUIDE_TITLE, size=16),
        "By the editors of Halcyon Freight",
        "This guide is our own and may be copied freely inside the company.",
    ]
    for page, chapter, name in (
        (2, 1, "Why plain words matter"),
        (4, 2, "Numbers and dates"),
        (7, 3, "Names of ships and places"),
    ):
        bodies[page - 1][:2] = [Styled(f"Chapter {chapter}", size=14), Styled(name, size=12)]
    bodies[5][15:18] = [
        "How many berths does the north quay have in the worked example?",
        "42",
        "The answer stands on a line of its own, as a reader would write it.",
    ]
    for number, body in enumerate(bodies, start=1):
        _page(pdf, [str(number)], body, [])
    pdf.output(str(path))


def _annual_report(path: Path) -> None:
    """Front matter numbered in lowercase roman numerals, then a running header and "- N -" page numbers."""
    pdf = _new_pdf()
    rng = random.Random(6)
    front = [
        [
            Styled("Annual Report of the Port of Keller", size=18),
            "for the year 2024",
            "Published by the Port of Keller Authority",
        ],
        [
            Styled("Contents", size=14),
            "Foreword by the harbour board",
            "Summary of the year",
            "Traffic and tonnage",
            "Works on the quays",
            "Accounts",
        ],
        [Styled("Foreword", size=14), *_paragraph_lines(pdf, _sentences(rng, 8))],
        [Styled("Summary of the year", size=14), *_paragraph_lines(pdf, _sentences(rng, 10))],
    ]
    for numeral, body in zip(REPORT_FRONT_MATTER, front):
        _page(pdf, [], body, [numeral])
    bodies = _body_pages(pdf, rng, REPORT_BODY_PAGES, 30)
    bodies[1][8 : 8 + len(TRAFFIC_TABLE) + 3] = [
        "The table gives the traffic of the last three years.",
        Styled("Traffic by kind", size=11),
        *TRAFFIC_TABLE,
        "Container traffic grew for the third year running.",
    ]
    for number, body in enumerate(bodies, start=1):
        _page(pdf, [REPORT_HEADER], body, [f"- {number} -"])
    pdf.output(str(path))


# --- documents without furniture --------------------------------------------------------------------------


def _story(path: Path) -> None:
    """Prose only; a refrain repeats in the body of every page, and opens three of them."""
    pdf = _new_pdf(STORY_TITLE)
    rng = random.Random(7)
    bodies = _body_pages(pdf, rng, 8, 40)
    bodies[0][:2] = [Styled(STORY_TITLE, size=16), "A story of the quay"]
    for number, body in enumerate(bodies, start=1):
        body.insert(20, STORY_REFRAIN)
        # Atop three pages too: a line seen in the body of every page is text wherever it stands.
        _page(pdf, [], [STORY_REFRAIN, *body] if number in (2, 5, 8) else body, [])
    pdf.output(str(path))


def _chapters(path: Path) -> None:
    """Chapter headings atop most pages, numbered out of step with the pages, and a closing sentence on each
    page whose figure number follows the page: a sentence, not a running footer."""
    pdf = _new_pdf("Handbook of the Timber Wharf")
    rng = random.Random(8)
    bodies = _body_pages(pdf, rng, 6, 36)
    bodies[0][:1] = ["12 March 2024"]
    chapter = 0
    for number, body in enumerate(bodies, start=1):
        top = []
        if number != 4:  # page 4 goes on with chapter 3
            chapter += 1
            top = [Styled(f"Chapter {chapter}", size=14)]
        _page(pdf, top, body, [f"See figure {number + 2} for the berth plan of this part of the wharf."])
    pdf.output(str(path))


# --- edge cases -------------------------------------------------------------------------------------------


def _two_columns(path: Path) -> tuple[list[tuple[str, str]], list[str]]:
    """Three pages: a title block and abstract over two columns, words hyphenated at line ends, and a table."""
    pdf = _new_pdf("Tidal Scheduling at Small Ports")
    rng = random.Random(9)
    column_width = (PAGE_WIDTH - 2 * MARGIN - 8) / 2
    broken: list[tuple[str, str]] = []
    paragraphs: list[str] = []
    for number in range(1, 4):
        pdf.add_page()
        y = MARGIN
        if number == 1:
            for line in [
                Styled("Tidal Scheduling at Small Ports", size=16),
                "Ilse Brandvold",
                "3 January 2026",
                Styled("Abstract", size=11),
                "This note compares how six small ports plan their berths around the tide.",
            ]:
                _write_line(pdf, MARGIN, y, line)
                y += LEADING + 1
        if number == 3:
            for line in [
                Styled("Table 1: Ports of the northern sea", size=11),
                Styled("Port Tonnage Area Harbour town Languages", "", 10),
            ]:
                _write_line(pdf, MARGIN, y, line)
                y += LEADING
            for row in PORT_TABLE:
                for x, cell in zip((MARGIN, MARGIN + 35, MARGIN + 55, MARGIN + 80, MARGIN + 115), row):
                    pdf.text(x, y, cell)
                y += LEADING
            y += LEADING
        rows = int((PAGE_HEIGHT - MARGIN - y) // LEADING)
        lines: list[str] = []
        while True:
            paragraph = " ".join(_sentences(rng, rng.randint(3, 5)))
            wrapped, breaks = _wrap(pdf, paragraph, column_width, hyphenate=True)
            if len(lines) + len(wrapped) > 2 * rows:
                break
            lines += wrapped
            broken += breaks
            paragraphs.append(paragraph)
        half = -(-len(lines) // 2)
        for column, column_lines in enumerate((lines[:half], lines[half:])):
            x = MARGIN + column * (column_width + 8)
            for row, line in enumerate(column_lines):
                pdf.text(x, y + row * LEADING, line)
    pdf.output(str(path))
    return broken, paragraphs


def _visual_order(line: str) -> str:
    """A right-to-left line as a word processor draws it, left to right: runs in reverse order, and the
    characters of each right-to-left run reversed; a left-to-right run ("Python") keeps its own order."""

    def rtl(word: str) -> bool:
        return any("\u0590" <= ch <= "\u08ff" for ch in word)

    runs: list[list[str]] = []
    for word in line.split(" "):
        if runs and rtl(runs[-1][-1]) == rtl(word):
            runs[-1].append(word)
        else:
            runs.append([word])
    drawn = [" ".join(run)[::-1] if rtl(run[0]) else " ".join(run) for run in reversed(runs)]
    return " ".join(drawn)


def _right_to_left(path: Path, font: Path) -> None:
    pdf = _new_pdf("Port rules in Arabic and Hebrew")
    pdf.add_font("quayside", fname=str(font))
    width = PAGE_WIDTH - 2 * MARGIN
    pdf.add_page()
    pdf.set_font("helvetica", "B", 14)
    pdf.text(MARGIN, MARGIN, "Port rules in Arabic and Hebrew")
    pdf.set_font("quayside", size=12)
    y = MARGIN + 2 * LEADING
    paragraphs = [
        " ".join(ARABIC_SENTENCES[:5]),
        " ".join(ARABIC_SENTENCES[5:]),
        " ".join(HEBREW_SENTENCES),
        MIXED_DIRECTION_LINE,
    ]
    for paragraph in paragraphs:
        for line in _wrap(pdf, paragraph, width)[0]:
            drawn = _visual_order(line)
            pdf.text(PAGE_WIDTH - MARGIN - pdf.get_string_width(drawn), y, drawn)  # right-aligned
            y += LEADING + 1
        y += LEADING
    pdf.output(str(path))


def _code_and_formula(path: Path) -> None:
    pdf = _new_pdf("Computing Berth Fees")
    rng = random.Random(10)
    pages = [
        [
            Styled("Computing Berth Fees in JavaScript", size=15),
            *_paragraph_lines(pdf, _sentences(rng, 9)),
            "The fee is computed by the function of Listing 1:",
            Styled("Listing 1: Berth fee in JavaScript", "I", 10),
            *[Styled(line, "", 10, "courier") for line in CODE_LISTING],
            *_paragraph_lines(pdf, _sentences(rng, 8)),
        ],
        [
            Styled("Formula", size=15),
            *_paragraph_lines(pdf, _sentences(rng, 8)),
            "For a tonnage t, a rate r and a stay of h hours:",
            *[Styled(line, "", 11, "courier") for line in FORMULA_LINES],
            *_paragraph_lines(pdf, _sentences(rng, 8)),
        ],
    ]
    for body in pages:
        _page(pdf, [], body, [])
    pdf.output(str(path))


def _scanned_image(lines: list[str]) -> Image.Image:
    """A page as a scanner sees it: text drawn as pixels, with no text layer in the PDF."""
    image = Image.new("L", (1240, 1754), 255)
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        draw.text((120, 140 + row * 48), line, fill=0)
    draw.rectangle((120, 900, 1100, 1500), outline=0, width=4)
    return image


def _figure_page(path: Path) -> None:
    """A text page, a page that is nothing but a picture, and a text page."""
    pdf = _new_pdf("Berth Plan with Figure")
    rng = random.Random(11)
    _page(pdf, [], [Styled("Berth Plan", size=15), *_paragraph_lines(pdf, _sentences(rng, 14))], [])
    pdf.add_page()
    chart = Image.new("RGB", (800, 600), "white")
    draw = ImageDraw.Draw(chart)
    for bar, height in enumerate([220, 340, 180, 410, 300]):
        draw.rectangle((80 + bar * 140, 560 - height, 180 + bar * 140, 560), fill=(40, 90, 160))
    pdf.image(chart, x=MARGIN, y=MARGIN, w=PAGE_WIDTH - 2 * MARGIN)
    _page(pdf, [], [Styled("Reading the plan", size=15), *_paragraph_lines(pdf, _sentences(rng, 14))], [])
    pdf.output(str(path))


def _outline(path: Path) -> None:
    """Five sections, one per page, each with a bookmark in the PDF's outline."""
    pdf = _new_pdf("Port Rules with an Outline")
    rng = random.Random(12)
    for section in OUTLINE_SECTIONS:
        pdf.add_page()
        pdf.start_section(section)
        y = MARGIN
        for line in [Styled(section, size=14), *_paragraph_lines(pdf, _sentences(rng, 12))]:
            _write_line(pdf, MARGIN, y, line)
            y += LEADING
    pdf.output(str(path))


def _encrypt(source: Path, target: Path, user_password: str) -> None:
    """AES: a user password locks the file; an owner password alone still lets anyone read it."""
    writer = PdfWriter(clone_from=source)
    algorithm = "AES-256" if user_password else "AES-128"
    writer.encrypt(user_password=user_password, owner_password="quay-owner-secret", algorithm=algorithm)
    writer.write(target)


# --- files that cannot be read -----------------------------------------------------------------------------


def _bad_files(corpus: AwkwardCorpus) -> None:
    bad = corpus.bad
    (bad / "locked.pdf").write_bytes((corpus.edge / "locked.pdf").read_bytes())
    whole = (corpus.furniture / "story.pdf").read_bytes()
    (bad / "truncated.pdf").write_bytes(whole[: len(whole) // 2])
    noise = random.Random(13).randbytes(4096)
    (bad / "random-bytes.pdf").write_bytes(b"\x00" + noise[1:])  # never starts like a PDF
    (bad / "empty.md").write_bytes(b"")
    (bad / "latin1.txt").write_bytes("Caf\u00e9 receipts are kept for ten years.".encode("latin-1"))
    scan = _new_pdf("A scanned page")
    scan.add_page()
    scan.image(
        _scanned_image(["Harbour Office", "Receipt for berth 14", "Paid in full on 3 May 2024"]), x=0, y=0, w=PAGE_WIDTH
    )
    scan.output(str(bad / "scan.pdf"))
    (bad / "slides.pptx").write_bytes(_slides())


def _slides() -> bytes:
    """A small PowerPoint package (a zip of XML parts): a format ingestion does not read."""
    parts = {
        "[Content_Types].xml": '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
        'content-types"><Override PartName="/ppt/presentation.xml" ContentType="application/'
        'vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"/></Types>',
        "ppt/presentation.xml": '<?xml version="1.0"?><p:presentation xmlns:p="http://schemas.openxmlformats.org/'
        'presentationml/2006/main"/>',
        "ppt/slides/slide1.xml": '<?xml version="1.0"?><p:sld xmlns:p="http://schemas.openxmlformats.org/'
        'presentationml/2006/main"><p:txBody>Quay safety briefing</p:txBody></p:sld>',
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), text)
    return buffer.getvalue()


# --- a font with right-to-left code points ---------------------------------------------------------------


def _box_font(path: Path) -> Path:
    """A TrueType font whose every glyph is a box, mapping ASCII, Latin-1, Hebrew and Arabic code points."""
    from fontTools.fontBuilder import FontBuilder
    from fontTools.pens.ttGlyphPen import TTGlyphPen

    codes = [*range(0x20, 0x7F), *range(0xA0, 0x100), *range(0x05D0, 0x05EB), *range(0x0600, 0x0700)]
    names = [".notdef", *(f"uni{code:04X}" for code in codes)]

    def box():
        pen = TTGlyphPen(None)
        pen.moveTo((60, 0))
        for corner in ((60, 620), (440, 620), (440, 0)):
            pen.lineTo(corner)
        pen.closePath()
        return pen.glyph()

    builder = FontBuilder(1000, isTTF=True)
    builder.setupGlyphOrder(names)
    builder.setupCharacterMap({code: f"uni{code:04X}" for code in codes})
    builder.setupGlyf({name: TTGlyphPen(None).glyph() if name == "uni0020" else box() for name in names})
    builder.setupHorizontalMetrics({name: (500, 60) for name in names})
    builder.setupHorizontalHeader(ascent=800, descent=-200)
    builder.setupNameTable({"familyName": "Quayside Boxes", "styleName": "Regular"})
    builder.setupOS2(sTypoAscender=800, sTypoDescender=-200, usWinAscent=800, usWinDescent=200)
    builder.setupPost()
    fixed = int((FIXED_DATE - datetime(1904, 1, 1, tzinfo=timezone.utc)).total_seconds())
    builder.updateHead(created=fixed, modified=fixed)
    path.parent.mkdir(parents=True, exist_ok=True)
    builder.save(str(path))
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m rag_eval_pipeline_tests.support.awkward_pdfs OUTPUT_FOLDER")
    built = build(Path(sys.argv[1]))
    for file in sorted(p for p in built.root.rglob("*") if p.is_file()):
        print(file.relative_to(built.root))

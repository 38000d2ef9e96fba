"""A synthetic h-and-m-personalized-fashion-recommendations: a shop's purchases (transactions_train.csv `t_dat,
customer_id,article_id,price,sales_channel_id`, one row per item bought, in date order, the article ids without
their leading zero), its customers (customers.csv) and articles (articles.csv, ids with the leading zero, the real
25 columns), product photos under images/<first 3 digits>/<article_id>.jpg for most articles, and Kaggle's sample
(every customer, the same 12 ids with leading zeros). MLE-bench holds out the last 8 days of purchases: private/
answers.csv lists, for each customer who bought then, the article ids bought, space-separated, in purchase order.

The shop sells articles that rise after their launch and fade; each customer shops now and then (some often, most
rarely), mostly in a section of their own (ladies, men, children, sport), and often buys again what they bought in
the last weeks. So the articles most bought lately are a fair guess for anyone (the prior), and a customer's own
recent purchases a better one for those who shop often.

`sizes(scale)`: customers and articles at a factor of the replica's own counts; at REAL the real 1,371,980
customers and 105,542 articles over two years.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from runner.demo._layout import describe, is_real, parse_scale, scaled
from runner.demo._pictures import folders, hex_ids, render

CUSTOMERS, REAL_CUSTOMERS = 3_000, 1_371_980
ARTICLES, REAL_ARTICLES = 400, 105_542
WEEKS, REAL_WEEKS = 12, 105  # of purchases, ending on LAST_DAY (the real file runs from 2018-09-20)
LAST_DAY = np.datetime64("2020-09-22")
HELD_OUT_DAYS = 7  # MLE-bench's answers: the purchases from the last day less 7 days on (8 days)
VISITS_PER_WEEK = 0.3  # a customer's mean visits a week, drawn from a gamma of shape 0.5 (most rarely, some often)
REAL_VISITS_PER_WEEK = 0.1  # the real 31.8 M purchases of 1.37 M customers in 105 weeks: 0.22 items a week each
ITEMS_PER_VISIT = 1.3  # beyond the first item of a visit, a Poisson mean
AGAIN = 0.25  # an item bought again: one of the customer's last purchases of the past AGAIN_DAYS
AGAIN_DAYS = 28
MEMORY = 8  # the last purchases a customer may buy again
OWN_SECTION = 0.7  # an item bought new comes from the customer's own section this often
LIFE_DAYS = (10, 60)  # how long an article sells before it fades to a third
PHOTO_SHARE = 0.9  # articles with a photo
PHOTO = (16, 24)  # the replica's photos (width, height); the real ones are 1166 x 1750
SECTIONS = (("Ladieswear", "Ladieswear", "1"), ("Menswear", "Menswear", "3"),
            ("Baby/Children", "Children Sizes 92-140", "4"), ("Sport", "Sport", "5"), ("Divided", "Divided", "2"))
TYPES = (("Trousers", "Garment Lower body"), ("Dress", "Garment Full body"), ("Sweater", "Garment Upper body"),
         ("T-shirt", "Garment Upper body"), ("Jacket", "Garment Upper body"), ("Shorts", "Garment Lower body"),
         ("Socks", "Socks & Tights"), ("Hoodie", "Garment Upper body"), ("Skirt", "Garment Lower body"))
COLOURS = (("Black", (20, 20, 20)), ("White", (240, 240, 240)), ("Dark Blue", (30, 40, 110)),
           ("Light Pink", (240, 190, 200)), ("Grey", (128, 128, 128)), ("Beige", (220, 200, 160)),
           ("Red", (200, 30, 40)), ("Green", (40, 130, 60)))
SAMPLE = ("0706016001 0706016002 0372860001 0610776002 0759871002 0464297007 0372860002 0610776001 0399223001 "
          "0706016003 0720125001 0156231001")  # Kaggle's sample: the same 12 ids for everyone, leading zeros kept
CHUNK = 64


@dataclass(frozen=True)
class Shop:
    customers: int
    articles: int
    weeks: int
    visits: float  # a customer's mean visits a week (the replica's customers shop more, so more of them buy in
    # the held-out days)


def sizes(scale: float | str = 1.0) -> Shop:
    scale = parse_scale(scale)
    real = is_real(scale)
    return Shop(scaled(CUSTOMERS, REAL_CUSTOMERS, scale, 50), scaled(ARTICLES, REAL_ARTICLES, scale, 30),
                REAL_WEEKS if real else WEEKS, REAL_VISITS_PER_WEEK if real else VISITS_PER_WEEK)


def articles(count: int, days: int, rng: np.random.Generator) -> pd.DataFrame:
    """articles.csv's columns, and each article's section, launch day, life and appeal (for drawing purchases)."""
    codes = np.sort(rng.choice(np.arange(108_775, 959_461), max(1, count // 2), replace=False))
    product = np.sort(rng.choice(len(codes), count))
    variant = np.zeros(count, dtype=int)
    for k in range(1, count):
        variant[k] = variant[k - 1] + 1 if product[k] == product[k - 1] else 1
    section, kind, colour = rng.integers(0, len(SECTIONS), len(codes))[product], \
        rng.integers(0, len(TYPES), len(codes))[product], rng.integers(0, len(COLOURS), count)
    graphics = np.array(["Solid", "Stripe", "All over pattern", "Melange"])[rng.integers(0, 4, count)]
    names = np.array(["Jade", "Tilly", "Luna", "Basic", "Slim", "Ringo", "Perrie", "Skinny"])[
        rng.integers(0, 8, len(codes))][product]
    frame = pd.DataFrame({
        "article_id": [f"0{codes[p]}{v:03d}" for p, v in zip(product, variant)],
        "product_code": codes[product], "prod_name": [f"{n} {TYPES[t][0].lower()}" for n, t in zip(names, kind)],
        "product_type_no": 250 + kind, "product_type_name": [TYPES[t][0] for t in kind],
        "product_group_name": [TYPES[t][1] for t in kind],
        "graphical_appearance_no": 1010000 + pd.factorize(graphics)[0], "graphical_appearance_name": graphics,
        "colour_group_code": 9 + colour * 3, "colour_group_name": [COLOURS[c][0] for c in colour],
        "perceived_colour_value_id": 1 + colour % 4,
        "perceived_colour_value_name": np.array(["Dark", "Light", "Dusty Light", "Medium"])[colour % 4],
        "perceived_colour_master_id": 5 + colour, "perceived_colour_master_name": [COLOURS[c][0] for c in colour],
        "department_no": 1600 + section * 100 + kind, "department_name": [TYPES[t][0] for t in kind],
        "index_code": np.array(list("ABFSD"))[section], "index_name": [SECTIONS[s][1] for s in section],
        "index_group_no": [int(SECTIONS[s][2]) for s in section], "index_group_name": [SECTIONS[s][0] for s in section],
        "section_no": 10 + section * 5, "section_name": [f"{SECTIONS[s][0]} {TYPES[t][0]}" for s, t in zip(section, kind)],
        "garment_group_no": 1000 + kind, "garment_group_name": [TYPES[t][1] for t in kind],
        "detail_desc": [f"{TYPES[t][0]} in {COLOURS[c][0].lower()} {g.lower()} jersey." for t, c, g in
                        zip(kind, colour, graphics)]})
    launch = rng.integers(-60, days, count)
    return frame.assign(section=section, launch=launch, life=rng.uniform(*LIFE_DAYS, count),
                        appeal=rng.lognormal(0, 1, count), colour=colour)


def customers(count: int, visits: float, rng: np.random.Generator) -> pd.DataFrame:
    """customers.csv's columns, and each customer's section and visits a week (for drawing purchases)."""
    ages = rng.integers(16, 80, count).astype(float)
    ages[rng.random(count) < 0.01] = np.nan
    news = rng.random(count)
    return pd.DataFrame({
        "customer_id": hex_ids(rng, count, 64), "FN": np.where(rng.random(count) < 0.35, 1.0, np.nan),
        "Active": np.where(rng.random(count) < 0.34, 1.0, np.nan),
        "club_member_status": np.array(["ACTIVE", "PRE-CREATE", "LEFT CLUB"])[
            np.searchsorted([0.93, 0.995], rng.random(count))],
        "fashion_news_frequency": np.where(news < 0.64, "NONE", np.where(news < 0.99, "Regularly", "Monthly")),
        "age": ages, "postal_code": hex_ids(rng, count, 64),
        "section": rng.integers(0, len(SECTIONS), count),
        "visits": rng.gamma(0.5, visits / 0.5, count)})


def _appeal(shop: pd.DataFrame, day: int) -> np.ndarray:
    """Each article's weight on `day`: none before its launch, fading to a third over its life after."""
    age = day - shop["launch"].to_numpy()
    return np.where(age >= 0, shop["appeal"].to_numpy() * np.exp(-np.maximum(age, 0) / shop["life"].to_numpy()), 0.0)


def purchases(people: pd.DataFrame, shop: pd.DataFrame, days: int, rng: np.random.Generator) -> pd.DataFrame:
    """Every item bought, day by day: (day, customer, article) rows, in order."""
    memory = np.full((len(people), MEMORY), -1, dtype=np.int64)
    when = np.full((len(people), MEMORY), -10**6, dtype=np.int64)
    count = np.zeros(len(people), dtype=np.int64)
    rate = people["visits"].to_numpy() / 7
    own = people["section"].to_numpy()
    sections = shop["section"].to_numpy()
    parts = []
    for day in range(days):
        visitors = np.flatnonzero(rng.random(len(people)) < rate)
        buyer = np.repeat(visitors, 1 + rng.poisson(ITEMS_PER_VISIT, len(visitors)))
        article = np.full(len(buyer), -1, dtype=np.int64)
        slot = (rng.random(len(buyer)) * np.minimum(count[buyer], MEMORY)).astype(np.int64)  # a purchase kept
        recent = (count[buyer] > 0) & (when[buyer, slot] >= day - AGAIN_DAYS)
        again = recent & (rng.random(len(buyer)) < AGAIN)
        article[again] = memory[buyer[again], slot[again]]
        weights = _appeal(shop, day)
        home = rng.random(len(buyer)) < OWN_SECTION
        for section in range(len(SECTIONS)):
            take = ~again & home & (own[buyer] == section)
            w = np.where(sections == section, weights, 0.0)
            if take.any() and w.sum() > 0:
                article[take] = rng.choice(len(w), int(take.sum()), p=w / w.sum())
        rest = article < 0
        article[rest] = rng.choice(len(weights), int(rest.sum()), p=weights / weights.sum())
        order = np.argsort(buyer, kind="stable")
        buyer, article = buyer[order], article[order]
        rank = np.arange(len(buyer)) - np.searchsorted(buyer, buyer)  # each item's place among its buyer's today
        place = (count[buyer] + rank) % MEMORY
        memory[buyer, place], when[buyer, place] = article, day
        np.add.at(count, buyer, 1)
        parts.append(np.column_stack([np.full(len(buyer), day), buyer, article]))
    return pd.DataFrame(np.concatenate(parts), columns=["day", "customer", "article"])


def _photos(items: list[tuple[Path, int]], seed: int) -> list:
    rng = np.random.default_rng(seed)
    for path, colour in items:
        pixels = np.asarray(COLOURS[colour][1], dtype=float) + rng.normal(0, 6, (PHOTO[1], PHOTO[0], 3))
        Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(path, quality=90)
    return []


def generate(root: Path, rng: np.random.Generator, scale: float | str = 1.0) -> None:
    """Write prepared/public (transactions_train.csv, customers.csv, articles.csv, images/, sample_submission.csv)
    and prepared/private/answers.csv."""
    size = sizes(scale)
    public, private = folders(root, "images")
    days = size.weeks * 7
    shop, people = articles(size.articles, days, rng), customers(size.customers, size.visits, rng)
    bought = purchases(people, shop, days, rng)
    dates = LAST_DAY - (days - 1) + bought["day"].to_numpy().astype("timedelta64[D]")
    ids = shop["article_id"].str.lstrip("0").astype(np.int64).to_numpy()  # as MLE-bench's pandas wrote them
    prices = np.round(0.01 + 0.05 * shop["appeal"].to_numpy() / (1 + shop["appeal"].to_numpy()), 6)
    transactions = pd.DataFrame({
        "t_dat": dates.astype(str), "customer_id": people["customer_id"].to_numpy()[bought["customer"]],
        "article_id": ids[bought["article"]], "price": prices[bought["article"]] * rng.uniform(0.8, 1.0, len(bought)),
        "sales_channel_id": np.where(rng.random(len(bought)) < 0.7, 2, 1)})
    held_out = dates >= LAST_DAY - HELD_OUT_DAYS
    transactions.loc[~held_out].to_csv(public / "transactions_train.csv", index=False)
    answers = transactions.loc[held_out].groupby("customer_id")["article_id"].apply(
        lambda bought_ids: " ".join(bought_ids.astype(str))).reset_index().rename(columns={"article_id": "prediction"})
    answers.to_csv(private / "answers.csv", index=False)
    shop.drop(columns=["section", "launch", "life", "appeal", "colour"]).to_csv(public / "articles.csv", index=False)
    people.drop(columns=["section", "visits"]).to_csv(public / "customers.csv", index=False)
    people[["customer_id"]].assign(prediction=SAMPLE).to_csv(public / "sample_submission.csv", index=False)
    shown = shop.loc[rng.random(len(shop)) < PHOTO_SHARE]
    for folder in shown["article_id"].str[:3].unique():
        (public / "images" / folder).mkdir(exist_ok=True)
    items = [(public / "images" / a[:3] / f"{a}.jpg", int(c)) for a, c in zip(shown["article_id"], shown["colour"])]
    render(_photos, items, rng, CHUNK, len(items) * PHOTO[0] * PHOTO[1])
    describe(public, "H&M Personalized Fashion Recommendations",
             "Predict the articles each customer will buy in the 7 days after the training data ends: up to 12 "
             "article ids per customer, best first, space-separated.",
             "Submissions are evaluated on the Mean Average Precision @ 12 (MAP@12), over the customers who bought.",
             "Submit `customer_id,prediction` for every customer of sample_submission.csv, and no other column.")

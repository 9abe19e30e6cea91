#!/usr/bin/env python3
# The generated site of the build benchmark: pages that link to each other (every page reachable from /), each with a
# style sheet, a script and three images from a shared pool; style sheets import a base sheet and use url().
# Usage: scripts/make-site.py ROOT PAGES ASSETS
import os, random, sys
root, pages, assets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(7)
os.makedirs(f"{root}/p", exist_ok=True); os.makedirs(f"{root}/img", exist_ok=True)
os.makedirs(f"{root}/css", exist_ok=True); os.makedirs(f"{root}/js", exist_ok=True)
words = "offline bundle crawl verify service release page style image script network cache".split()
def text(n): return " ".join(rng.choice(words) for _ in range(n))
for a in range(assets):
    with open(f"{root}/img/i{a}.png", "wb") as f: f.write(b"\x89PNG\r\n\x1a\n" + os.urandom(rng.randint(2000, 30000)))
for c in range(20):
    with open(f"{root}/css/s{c}.css", "w") as f:
        f.write(f'@import url("base.css");\n.c{c} {{ background: url(../img/i{c}.png) }}\n' + ".x { color: red }\n" * 50)
with open(f"{root}/css/base.css", "w") as f: f.write("body { font: 16px sans-serif }\n" * 40)
for j in range(20):
    with open(f"{root}/js/a{j}.js", "w") as f: f.write(f"console.log({j});\n" * 200)
def page(i):
    links = {i + 1, 2 * i + 1, 2 * i + 2, rng.randrange(pages), rng.randrange(pages)}
    links = [l for l in links if l < pages]
    imgs = [rng.randrange(assets) for _ in range(3)]
    body = "".join(f'<p>{text(80)}</p><a href="/p/{l}.html">page {l}</a>\n' for l in links)
    body += "".join(f'<img src="/img/i{m}.png" alt="">' for m in imgs)
    return (f'<!doctype html><html><head><title>Page {i}</title><link rel="stylesheet" href="/css/s{i % 20}.css">'
            f'<script src="/js/a{i % 20}.js"></script></head><body>{body}</body></html>')
for i in range(pages):
    with open(f"{root}/p/{i}.html", "w") as f: f.write(page(i))
with open(f"{root}/index.html", "w") as f: f.write('<html><body><a href="/p/0.html">start</a></body></html>')

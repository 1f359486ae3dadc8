"""One extraction: the engine protocol, prompts, the answer contracts, grounding
(model values → evidence spans) and the extractor that ties them together. What
the answer is worth (validation) is a sibling's question; the worker asks both.

This is the package's surface: other packages import these names from here,
never from a module inside.
"""

from pipeline.extraction.answer import document_in_prompt, shown_document
from pipeline.extraction.bounds import (
    DEFAULT_LIMITS,
    SIZE_LIMITS,
    DocumentLimits,
    over_limit,
)
from pipeline.extraction.cii import (
    CREDIT_NOTE_TYPES,
    InvoiceFacts,
    ItemFacts,
    NotCrossIndustryInvoice,
    TaxFacts,
    due_date_from_terms,
    read_cii,
)
from pipeline.extraction.einvoice import (
    CII_READER,
    EINVOICE_READERS,
    UBL_READER,
    EInvoiceReading,
    einvoice_reader,
    is_einvoice_reader,
    is_embedded_invoice,
    read_einvoice,
    read_invoice_xml,
)
from pipeline.extraction.engines import (
    ChatMessage,
    Completion,
    Engine,
    JsonSchema,
    Messages,
    OpenAICompatibleEngine,
    Timings,
    parse_json_output,
)
from pipeline.extraction.extractor import (
    CONTRACT_V1,
    CONTRACT_V2,
    DEFAULT_CONTRACT,
    ExtractionCall,
    answer_for,
    prepare_call,
    prompt_version,
    read_answer,
)
from pipeline.extraction.grounding import Change, Grounding
from pipeline.extraction.holdability import Obstacle, obstacles
from pipeline.extraction.prompts import build_messages, prompt_budget
from pipeline.extraction.reground import (
    CORRECTABLE_FIELDS,
    ROW_FIELDS,
    ground_correction,
    ground_row_correction,
    row_field,
)
from pipeline.extraction.ubl import NotUblInvoice, read_ubl
from pipeline.extraction.xml_schema import warm_schemas
from pipeline.extraction.xml_schematron import warm_rules
from pipeline.extraction.xml_tree import NotAnEInvoice

__all__ = [
    "CII_READER",
    "CONTRACT_V1",
    "CONTRACT_V2",
    "CORRECTABLE_FIELDS",
    "CREDIT_NOTE_TYPES",
    "DEFAULT_CONTRACT",
    "DEFAULT_LIMITS",
    "EINVOICE_READERS",
    "ROW_FIELDS",
    "SIZE_LIMITS",
    "UBL_READER",
    "Change",
    "ChatMessage",
    "Completion",
    "DocumentLimits",
    "EInvoiceReading",
    "Engine",
    "ExtractionCall",
    "Grounding",
    "InvoiceFacts",
    "ItemFacts",
    "JsonSchema",
    "Messages",
    "NotAnEInvoice",
    "NotCrossIndustryInvoice",
    "NotUblInvoice",
    "Obstacle",
    "OpenAICompatibleEngine",
    "TaxFacts",
    "Timings",
    "answer_for",
    "build_messages",
    "document_in_prompt",
    "due_date_from_terms",
    "einvoice_reader",
    "ground_correction",
    "ground_row_correction",
    "is_einvoice_reader",
    "is_embedded_invoice",
    "obstacles",
    "over_limit",
    "parse_json_output",
    "prepare_call",
    "prompt_budget",
    "prompt_version",
    "read_answer",
    "read_cii",
    "read_einvoice",
    "read_invoice_xml",
    "read_ubl",
    "row_field",
    "shown_document",
    "warm_rules",
    "warm_schemas",
]

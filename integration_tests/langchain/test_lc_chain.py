"""An LCEL RAG chain over MuSiQue with the retriever in it and a prompt-inspecting chat model."""

from __future__ import annotations

import re
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_graphstrata import GraphStrataRetriever
from pydantic import Field

N_QUESTIONS = 20
PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer the question using only the numbered context passages."),
        ("human", "Context:\n{context}\n\nQuestion: {question}"),
    ]
)
SOURCE_RE = re.compile(r"^\[(musique-[0-9a-f]+)\] ", re.M)


def format_docs(docs: list[Document]) -> str:
    return "\n\n".join(f"[{d.metadata['source']}] {d.page_content}" for d in docs)


class PromptRecordingChatModel(BaseChatModel):
    """Scripted chat model: records every prompt and answers by citing the first source."""

    prompts: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "prompt-recording-fake"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        text = "\n".join(str(m.content) for m in messages)
        self.prompts.append(text)
        sources = SOURCE_RE.findall(text)
        answer = f"According to {sources[0]}." if sources else "I don't know."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=answer))])


def _chain(retriever: Any, model: BaseChatModel) -> Any:
    return (
        {"context": retriever | format_docs, "question": RunnablePassthrough()}
        | PROMPT
        | model
        | StrOutputParser()
    )


def test_lcel_chain_puts_retrieved_passages_in_the_prompt(
    musique_index_dir: Any, musique_questions: list[dict[str, Any]]
) -> None:
    retriever = GraphStrataRetriever(index_dir=musique_index_dir, method="archrag", k=5)
    model = PromptRecordingChatModel()
    chain = _chain(retriever, model)
    found_evidence = 0
    for q in musique_questions[:N_QUESTIONS]:
        expected = retriever.invoke(q["question"])
        answer = chain.invoke(q["question"])
        prompt = model.prompts[-1]
        assert isinstance(answer, str)
        # The prompt holds the question and exactly the k passages the retriever returns.
        assert f"Question: {q['question']}" in prompt
        cited = SOURCE_RE.findall(prompt)
        assert cited == [d.metadata["document_ids"][0] for d in expected]
        assert len(cited) == 5
        for d in expected:
            assert d.page_content in prompt
        assert answer == f"According to {cited[0]}."
        found_evidence += bool(set(cited) & set(q["evidence_ids"]))
    # Retrieval quality through the chain: an evidence passage reaches the prompt for most
    # questions (MuSiQue is multi-hop; the slice has 200 passages).
    print(f"evidence in prompt for {found_evidence}/{N_QUESTIONS} questions")
    assert found_evidence / N_QUESTIONS >= 0.8, found_evidence


def test_k_bound_in_the_chain_and_in_the_constructor(
    musique_index_dir: Any, musique_questions: list[dict[str, Any]]
) -> None:
    question = musique_questions[0]["question"]
    retriever = GraphStrataRetriever(index_dir=musique_index_dir, method="hybrid", k=4)
    model = PromptRecordingChatModel()
    _chain(retriever, model).invoke(question)
    assert len(SOURCE_RE.findall(model.prompts[-1])) == 4
    # invoke-time k inside a chain: Runnable.bind forwards k to retriever.invoke
    _chain(retriever.bind(k=2), model).invoke(question)
    two = SOURCE_RE.findall(model.prompts[-1])
    assert two == [d.metadata["document_ids"][0] for d in retriever.invoke(question, k=2)]


async def test_chain_abatch(
    musique_index_dir: Any, musique_questions: list[dict[str, Any]]
) -> None:
    retriever = GraphStrataRetriever(index_dir=musique_index_dir, method="dense", k=3)
    model = PromptRecordingChatModel()
    questions = [q["question"] for q in musique_questions[:8]]
    answers = await _chain(retriever, model).abatch(questions)
    expected = [
        f"According to {retriever.invoke(q)[0].metadata['document_ids'][0]}." for q in questions
    ]
    assert answers == expected

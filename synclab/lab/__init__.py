"""The lab's machinery: labs generated from solutions, notebooks run and checked, classes graded.

* :mod:`.cli` — ``python -m synclab``: check, grade, labs, measure, bench, autograde, student-image;
* :mod:`.chapters` — the registry: one record per chapter, and the one place that imports them all; :mod:`.course`
  — each chapter's exercises and hints, a module per chapter, which the record points to;
* :mod:`.exercises` — every exercise, gathered from the registry: its chapter, points, what it defines and its check
  call;
* :mod:`.labgen` — labs generated from the solution notebooks; :mod:`.hints`, :mod:`.main_flow`,
  :mod:`.code_sources` — what the pages and labs show of each exercise;
* :mod:`.notebook_cells` — what a notebook's cells are (setup, answer, check), for the check and the grader;
* :mod:`.learner_check` — the learner's check: a lab's check cells run in this process as the notebook runs them;
  :mod:`.check_server` — the next checks forked from a warm Python that has imported torch and the chapters;
* :mod:`.notebook_runner` — a notebook run in a fresh kernel, within time limits that hold;
  :mod:`.profile_html` — a run's figures as one offline page;
* :mod:`.notebook_code` — a function loaded from a notebook (chapter 6 loads the chapters' fixes);
* :mod:`.verdicts` — one exercise's verdict, as the check and the grader report it;
* the grader: :mod:`.judge` (each exercise judged from the saved notebook in a process of its own),
  :mod:`.judge_worker` (that process), :mod:`.worker_server` (the worker kept warm, forking each job's),
  :mod:`.cell_runner` (the reader's cells run as a kernel runs them),
  :mod:`.audit` (its sandbox's hook), :mod:`.witnesses` (what each passed check found right, attached through the
  checks' one hook), :mod:`.answer_scan` (what its reading of an answer lists for the instructor); every exercise
  judged apart, :mod:`.judged_apart` (the checks here, the answer in :mod:`.answer_process`, its own process, forked
  by :mod:`.answer_server`, kept warm) and :mod:`synclab.answer_keys.plain_data` (what crosses between them);
* a class: :mod:`.nbgrader_source`, :mod:`.nbgrader_judge`, :mod:`.nbgrader_run`, :mod:`.grading` (nbgrader),
  :mod:`.student_image` (the students' install) and :mod:`.expected_results` (the answers of the public cases it
  stores in place of the answers it does not ship);
* :mod:`.citations` — the pull requests and issues the book cites (the appendix);
* :mod:`.new_chapter` — ``python -m synclab new-chapter``: a chapter's skeleton from ``templates/``, registered;
* :mod:`.gpu_record` — what ``make gpu-check`` gave, step by step, kept beside the device's references.

Nothing in a chapter or below imports this package, except :mod:`.notebook_code` and :mod:`.exercises` (chapter 6) and
:mod:`.citations` (the book's appendix), which import no chapter.
"""

;;; tlm-mode.el --- Major mode for tlm model descriptions  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "26.1"))
;; Keywords: languages

;;; Commentary:

;; Highlighting, indentation and comments for .tlm files, the
;; model descriptions of tlm (tapered language models).
;;
;;   (add-to-list 'load-path "/path/to/tlm/editors/emacs")
;;   (require 'tlm-mode)
;;
;; The name lists below must cover `tlmc --print-keywords'; the editor
;; tests (tests/editors) fail when one is missing.

;;; Code:

(defgroup tlm nil
  "Editing tlm model descriptions."
  :group 'languages
  :prefix "tlm-")

(defcustom tlm-indent-offset 4
  "Columns of indentation per open bracket."
  :type 'integer
  :safe #'integerp)

;; Emacs 29 has faces for properties, numbers and escapes; older ones get
;; the nearest of their own.
(defun tlm--face (new old)
  "NEW if this Emacs has that face, else OLD."
  (if (facep new) new old))

(defface tlm-setting-face
  `((t :inherit ,(tlm--face 'font-lock-property-name-face 'font-lock-variable-name-face)))
  "Face for a model, train or study setting where it is assigned.")

(defface tlm-number-face
  `((t :inherit ,(tlm--face 'font-lock-number-face 'font-lock-constant-face)))
  "Face for numbers.")

(defface tlm-escape-face
  `((t :inherit ,(tlm--face 'font-lock-escape-face 'font-lock-regexp-grouping-backslash)))
  "Face for backslash escapes in strings.")

(defconst tlm-keywords '("use" "param" "schedule" "model" "study" "train" "in"))
(defconst tlm-settings
  '("vocab" "context" "d_model" "layers" "heads" "head_dim" "mixer" "mlp" "d_ff"
    "quantum" "budget" "tie_embeddings" "norm_eps" "rope_base" "monotone" "gate"
    "chunk" "inner_lr" "cms" "tokenizer")
  "Settings of a model body.")
(defconst tlm-train-settings
  '("batch" "context" "steps" "optimizer" "lr_schedule" "seed" "grad_clip"
    "accumulate" "eval_every" "eval_batches" "ckpt_every" "log_every")
  "Settings of a train block.")
(defconst tlm-study-settings
  '("base" "variants" "baseline" "seeds" "data" "val" "eval" "choices" "cloze")
  "Settings of a study body.")
(defconst tlm-mixers '("attention" "gated_attention" "titans" "hope_attention"))
(defconst tlm-mlps '("swiglu" "gelu"))
(defconst tlm-values '("true" "false" "none" "elementwise" "headwise"))
(defconst tlm-functions '("uniform" "adamw" "sgd" "constant")
  "Value constructors used in settings.")
(defconst tlm-builtins
  '("abs" "ceil" "clamp" "cos" "exp" "floor" "log" "max" "mean" "min" "pow"
    "round" "sigmoid" "sin" "sqrt" "tanh")
  "Math functions.")
(defconst tlm-constants '("pi"))
(defconst tlm-variables '("l" "L" "t") "Layer variables.")
(defconst tlm-schedules
  '("linear" "cosine" "sigmoid" "thirds" "openelm" "valley" "normalize")
  "Standard schedules from stdlib/schedules.tlm.")

(defconst tlm--name "[A-Za-z_][A-Za-z0-9_]*")

(defvar tlm-mode-syntax-table
  (let ((st (make-syntax-table)))
    ;; // line comments (style b) and /* block comments */ (style a).
    (modify-syntax-entry ?/ ". 124b" st)
    (modify-syntax-entry ?* ". 23" st)
    (modify-syntax-entry ?\n "> b" st)
    (modify-syntax-entry ?\" "\"" st)
    (modify-syntax-entry ?\\ "\\" st)
    (modify-syntax-entry ?_ "_" st)
    (dolist (c '(?+ ?- ?% ?< ?> ?= ?& ?| ?! ?? ?: ?, ?\; ?.))
      (modify-syntax-entry c "." st))
    st)
  "Syntax table for `tlm-mode'.")

(defun tlm--settings-at (open)
  "The setting names allowed in the block whose `{' is at OPEN, or nil."
  (when (and open (eq (char-after open) ?{))
    (save-excursion
      (goto-char open)
      (skip-chars-backward " \t\n")
      (cond ((looking-back "\\_<train" (line-beginning-position)) tlm-train-settings)
            ((looking-back (concat "\\_<study[ \t\n]+" tlm--name) nil) tlm-study-settings)
            (t tlm-settings)))))

(defun tlm--match-setting (limit)
  "Find the next setting assigned (NAME = ...) before LIMIT.
A name counts as a setting only in the block it belongs to: `steps' in a
train block, `d_ff' in a model body, neither inside a call's parentheses."
  (let (found)
    (while (and (not found)
                (re-search-forward
                 (concat "\\_<\\(" tlm--name "\\)[ \t]*=\\(?:[^=]\\|$\\)") limit t))
      (goto-char (match-end 1))
      ;; `syntax-ppss' moves point: keep it after the match.
      (let ((names (save-match-data
                     (let ((ppss (save-excursion (syntax-ppss (match-beginning 1)))))
                       (and (not (nth 8 ppss)) (tlm--settings-at (nth 1 ppss)))))))
        (setq found (member (match-string-no-properties 1) names))))
    (and found t)))

(defun tlm--match-escape (limit)
  "Find the next escape (\\n \\t \\r \\\\ \\\") inside a string before LIMIT."
  (let (found)
    (while (and (not found) (re-search-forward "\\\\[ntr\\\\\"]" limit t))
      (setq found (save-match-data
                    (save-excursion (nth 3 (syntax-ppss (match-beginning 0)))))))
    (and found t)))

(defun tlm--paren-end ()
  "Where the parenthesis just before point closes, or the line's end."
  (save-excursion
    (condition-case nil
        (progn (backward-char) (forward-sexp) (point))
      (error (line-end-position)))))

(defvar tlm-font-lock-keywords
  (let ((names (lambda (list) (regexp-opt list 'symbols))))
    `(;; Declarations first: their names win over the lists below
      ;; (stdlib/schedules.tlm declares `schedule sigmoid(...)').
      (,(concat "\\_<model[ \t]+\\(" tlm--name "\\)\\(?:[ \t]*:[ \t]*\\(" tlm--name "\\)\\)?")
       (1 font-lock-type-face) (2 font-lock-type-face nil t))
      (,(concat "\\_<study[ \t]+\\(" tlm--name "\\)") (1 font-lock-type-face))
      (,(concat "\\_<schedule[ \t]+\\(" tlm--name "\\)[ \t]*(")
       (1 font-lock-function-name-face)
       ;; Parameters, not the names in their default values (k = 10).
       (,(concat "\\(" tlm--name "\\)[ \t]*\\(?:[,)]\\|=[^=]\\)") (tlm--paren-end) nil
        (1 font-lock-variable-name-face)))
      (,(concat "\\_<param[ \t]+\\(" tlm--name "\\)") 1 font-lock-variable-name-face)
      (,(concat "\\_<use[ \t]+\\(" tlm--name "\\(?:\\." tlm--name "\\)*\\)")
       1 font-lock-constant-face)
      (,(funcall names tlm-keywords) . font-lock-keyword-face)
      (tlm--match-setting 1 'tlm-setting-face)
      ;; A standard schedule wins over a builtin or a value constructor.
      (,(funcall names (append tlm-schedules tlm-builtins tlm-functions tlm-variables))
       . font-lock-builtin-face)
      (,(funcall names (append tlm-constants tlm-values tlm-mixers tlm-mlps))
       . font-lock-constant-face)
      ;; 1_000 3e-4 1.5 .5 2.5e+3, not the 2 of layer2, nor 1__0 or 1_ (an _
      ;; stands only between digits).
      ("\\(?:^\\|[^[:alnum:]_.]\\)\\(\\(?:[0-9]+\\(?:_[0-9]+\\)*\\(?:\\.[0-9]+\\(?:_[0-9]+\\)*\\)?\\|\\.[0-9]+\\(?:_[0-9]+\\)*\\)\\(?:[eE][-+]?[0-9]+\\(?:_[0-9]+\\)*\\)?\\)\\_>"
       1 'tlm-number-face)
      (tlm--match-escape 0 'tlm-escape-face prepend)))
  "Highlighting for `tlm-mode'.")

(defun tlm--continuation-p ()
  "Whether the line at point continues a statement from the lines above.
It does when the code before it does not end in ; { } , or an opening
bracket, and it does not start a block itself."
  (save-excursion
    (back-to-indentation)
    (unless (looking-at "{")
      (forward-comment (- (point)))
      (not (or (bobp) (memq (char-before) '(?\; ?{ ?} ?, ?\( ?\[)))))))

(defun tlm--calculate-indent ()
  "The column the current line should start at, or nil to leave it."
  (save-excursion
    (back-to-indentation)
    (let ((ppss (save-excursion (syntax-ppss (line-beginning-position))))
          (star (looking-at "\\*"))
          (closing (looking-at "[])}]"))
          (more (if (tlm--continuation-p) tlm-indent-offset 0)))
      (cond
       ;; Inside a block comment: ` * ...' under the `*' of `/*',
       ;; anything else under the first character after `/* '.
       ((nth 4 ppss)
        (goto-char (nth 8 ppss))
        (+ (current-column) (if star 1 3)))
       ((nth 3 ppss) nil)
       ;; A closing bracket lines up with the line that opened it.
       (closing
        (if (nth 1 ppss) (progn (goto-char (nth 1 ppss)) (current-indentation)) 0))
       ;; One offset deeper than the line that opened the innermost open
       ;; bracket, so `f(g(' indents once; one more on a continuation line.
       ((nth 1 ppss)
        (goto-char (nth 1 ppss))
        (+ (current-indentation) tlm-indent-offset more))
       (t more)))))

(defun tlm-indent-line ()
  "Indent the current line as tlm code."
  (interactive)
  (let ((indent (tlm--calculate-indent))
        (offset (- (current-column) (current-indentation))))
    (when indent
      (indent-line-to indent)
      (when (> offset 0) (forward-char offset)))))

;;;###autoload
(define-derived-mode tlm-mode prog-mode "tlm"
  "Major mode for editing tlm model descriptions."
  :syntax-table tlm-mode-syntax-table
  (setq-local comment-start "// ")
  (setq-local comment-end "")
  (setq-local comment-start-skip "\\(?://+\\|/\\*+\\)\\s-*")
  (setq-local font-lock-defaults '(tlm-font-lock-keywords))
  (setq-local indent-line-function #'tlm-indent-line)
  (setq-local indent-tabs-mode nil)
  (setq-local electric-indent-chars (append "{}()[]" electric-indent-chars))
  (setq-local imenu-generic-expression
              `(("Models" ,(concat "^\\s-*model\\s-+\\(" tlm--name "\\)") 1)
                ("Schedules" ,(concat "^\\s-*schedule\\s-+\\(" tlm--name "\\)") 1))))

;;;###autoload
(add-to-list 'auto-mode-alist '("\\.tlm\\'" . tlm-mode))

(provide 'tlm-mode)
;;; tlm-mode.el ends here

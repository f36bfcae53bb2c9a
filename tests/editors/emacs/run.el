;;; run.el --- batch tests for editors/emacs/tlm-mode.el  -*- lexical-binding: t; -*-
;;
;;   emacs -Q --batch -L editors/emacs -l tests/editors/emacs/run.el MODE FILE...
;;
;; MODE syntax:   FILE has `// ^^^ face' lines under the source line they
;;                test (`// <--- face' for the first columns); the face must
;;                be the text's face or one of its faces; nil means none.
;; MODE indent:   FILE is correctly indented; strip all indentation (then add
;;                three spaces to every line), `indent-region', and compare.
;; MODE keywords: FILE is `tlmc --print-keywords' output; every name must get
;;                its class's face in a snippet of code.
;; Exits with status 1 after reporting all failures.

(require 'cl-lib)
(require 'tlm-mode)

;; The tests edit the sample files in buffers but never save them.
(setq create-lockfiles nil)

(defvar tlm-test-failures nil)
(defun tlm-test-fail (fmt &rest args)
  (push (apply #'format fmt args) tlm-test-failures))

(defun tlm-test-faces (pos)
  (let ((face (get-text-property pos 'face)))
    (if (listp face) face (list face))))

(defun tlm-test-open (file)
  (find-file file)
  (unless (eq major-mode 'tlm-mode)
    (tlm-test-fail "%s: auto-mode-alist does not open it in tlm-mode (%s)" file major-mode))
  (tlm-mode)
  (font-lock-ensure))

(defun tlm-test-syntax (file)
  (tlm-test-open file)
  (unless (and (equal comment-start "// ") (eq (char-syntax ?\n) ?>))
    (tlm-test-fail "%s: comment syntax not set up" file))
  (let ((src nil) (checked 0))
    (goto-char (point-min))
    (while (not (eobp))
      (let ((text (buffer-substring-no-properties (line-beginning-position) (line-end-position))))
        (if (not (string-match "\\`//\\( *\\)\\(\\^+\\|<-+\\)[ \t]+\\([^ \t]+\\)[ \t]*\\'" text))
            (unless (string-prefix-p "//" text)
              (setq src (cons (line-number-at-pos) (line-beginning-position))))
          (let* ((marks (match-string 2 text))
                 (want (intern (match-string 3 text)))
                 (first (if (eq (aref marks 0) ?<) 0 (+ 2 (length (match-string 1 text)))))
                 (width (if (eq (aref marks 0) ?<) (1- (length marks)) (length marks))))
            (dotimes (i width)
              (let* ((col (+ first i))
                     (faces (tlm-test-faces (+ (cdr src) col))))
                (cl-incf checked)
                (unless (if want (memq want faces) (null (delq nil faces)))
                  (tlm-test-fail "%s:%d:%d: want %s, got %S" file (car src) (1+ col)
                                 want (delq nil faces))))))))
      (forward-line 1))
    (when (= checked 0)
      (tlm-test-fail "%s: no assertions" file))))

(defun tlm-test-indent (file)
  (tlm-test-open file)
  (let ((want (split-string (buffer-string) "\n")))
    ;; Reindent from no indentation at all, then from too much.
    (dolist (pass '(("^[ \t]+" . "") ("^\\([ \t]*\\)\\([^ \t\n]\\)" . "   \\1\\2")))
      (goto-char (point-min))
      (while (re-search-forward (car pass) nil t)
        (replace-match (cdr pass)))
      (indent-region (point-min) (point-max))
      (cl-loop for w in want
               for g in (split-string (buffer-string) "\n")
               for n from 1
               unless (equal w g)
               do (tlm-test-fail "%s:%d: indent (%s)\n  want: %s\n  got:  %s" file n
                                 (if (equal (cdr pass) "") "from none" "from too much") w g)))
    (set-buffer-modified-p nil)))

;; Each class is checked in a snippet where its names occur: (LINES LINE COL),
;; the name at 1-based LINE and 0-based COL.
(defconst tlm-test-snippets
  '((keyword ("NAME x") 1 0)
    (setting ("model m {" "    NAME = 1;" "}") 2 4)
    (train_setting ("train {" "    NAME = 1;" "}") 2 4)
    (study_setting ("study s {" "    NAME = 1;" "}") 2 4)
    (value ("model m {" "    d_ff = NAME;" "}") 2 11)
    (call ("model m {" "    d_ff = NAME(1);" "}") 2 11)))
(defconst tlm-test-faces
  '((keyword . font-lock-keyword-face)
    (setting . tlm-setting-face) (train_setting . tlm-setting-face)
    (study_setting . tlm-setting-face)
    (mixer . font-lock-constant-face) (mlp . font-lock-constant-face)
    (value . font-lock-constant-face) (constant . font-lock-constant-face)
    (function . font-lock-builtin-face) (builtin . font-lock-builtin-face)
    (schedule . font-lock-builtin-face) (variable . font-lock-builtin-face)))

(defun tlm-test-keywords (file)
  (let ((classes nil))
    (with-temp-buffer
      (insert-file-contents file)
      (dolist (line (split-string (buffer-string) "\n" t))
        (if (not (string-match "\\`\\([A-Za-z_][A-Za-z0-9_]*\\) \\([A-Za-z_][A-Za-z0-9_]*\\)\\'" line))
            (tlm-test-fail "%s: bad line: %s" file line)
          (let ((class (intern (match-string 1 line))))
            (unless (assq class classes) (push (list class) classes))
            (push (match-string 2 line) (cdr (assq class classes)))))))
    (dolist (entry (reverse classes))
      (let ((class (car entry)))
        (if (not (assq class tlm-test-faces))
            (tlm-test-fail "class %s is new: teach editors/emacs/tlm-mode.el and tests/editors/emacs/run.el about it" class)
          (dolist (name (reverse (cdr entry)))
            (dolist (kind (pcase class
                            ('keyword '(keyword))
                            ((or 'setting 'train_setting 'study_setting) (list class))
                            ('schedule '(value call))
                            ((or 'function 'builtin) '(call))
                            (_ '(value))))
              (pcase-let ((`(,lines ,line ,col) (cdr (assq kind tlm-test-snippets))))
                (with-temp-buffer
                  (insert (replace-regexp-in-string "NAME" name (mapconcat #'identity lines "\n") t t))
                  (tlm-mode)
                  (font-lock-ensure)
                  (goto-char (point-min))
                  (forward-line (1- line))
                  (let* ((beg (+ (point) col))
                         (want (cdr (assq class tlm-test-faces)))
                         (faces (tlm-test-faces beg)))
                    (unless (and (memq want faces)
                                 (equal (tlm-test-faces (+ beg (length name) -1)) faces))
                      (tlm-test-fail "%s %s: editors/emacs/tlm-mode.el gives %s in `%s', want %s"
                                     class name faces
                                     (buffer-substring-no-properties (line-beginning-position) (line-end-position))
                                     want))))))))))))

(let* ((mode (pop command-line-args-left))
       (files command-line-args-left)
       (fn (intern-soft (concat "tlm-test-" mode))))
  (setq command-line-args-left nil)
  (if (or (null files) (not (member mode '("syntax" "indent" "keywords"))))
      (tlm-test-fail "usage: run.el syntax|indent|keywords FILE...")
    (dolist (file files)
      (condition-case err
          (funcall fn file)
        (error (tlm-test-fail "%s: %s" file (error-message-string err))))))
  (if (null tlm-test-failures)
      (message "emacs %s: ok (%s)" mode (mapconcat #'identity files " "))
    (dolist (f (reverse tlm-test-failures)) (message "%s" f))
    (message "emacs %s: %d failure(s)" mode (length tlm-test-failures))
    (kill-emacs 1)))

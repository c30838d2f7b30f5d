;;; agentd-lint.el --- Lint agentd.el: byte-compile, checkdoc, package-lint -*- lexical-binding: t; -*-

;;; Commentary:

;; emacs --batch -Q -l editors/emacs/test/agentd-lint.el FILE
;;
;; Byte-compiles FILE (a copy of agentd.el: the .elc lands beside it)
;; with every warning an error, runs checkdoc and package-lint on it,
;; prints each problem, and exits 1 if there was any.  package-lint is
;; taken from Debian's elpa-package-lint; without it the run says
;; "package-lint: missing" and exits 2, so the caller decides whether
;; that is a failure.

;;; Code:

(require 'bytecomp)
(require 'checkdoc)

(defvar agentd-lint--problems 0
  "Problems found so far.")

(defun agentd-lint--problem (format-string &rest args)
  "Report a problem from FORMAT-STRING and ARGS."
  (setq agentd-lint--problems (1+ agentd-lint--problems))
  (message "%s" (apply #'format format-string args)))

(defun agentd-lint--stale-p (problem)
  "Whether PROBLEM is package-lint 0.16's verdict that Emacs 28 is unreleased.
Debian's package-lint 0.16 predates Emacs 28.1 (April 2022) and warns that
depending on it makes a package uninstallable; later versions do not.  The
current buffer is the file checked."
  (and (string-search "uninstallable in all released Emacs versions" (nth 3 problem))
       (save-excursion
         (goto-char (point-min))
         (forward-line (1- (car problem)))
         (looking-at-p ";; Package-Requires: ((emacs \"28.1\"))$"))))

(let* ((file (expand-file-name (car command-line-args-left)))
       (default-directory (file-name-directory file)))
  (setq command-line-args-left nil)
  (push default-directory load-path)

  (let ((byte-compile-error-on-warn t))
    (if (byte-compile-file file)
        (message "byte-compile: clean")
      (agentd-lint--problem "byte-compile: %s has warnings or errors (above)" file)))

  (advice-add 'checkdoc-error :before
              (lambda (point msg)
                (agentd-lint--problem "checkdoc: %s:%d: %s" file
                                      (line-number-at-pos point) msg)))
  (let ((before agentd-lint--problems))
    (checkdoc-file file)
    (when (= before agentd-lint--problems)
      (message "checkdoc: clean")))

  (dolist (dir (file-expand-wildcards "/usr/share/emacs/site-lisp/elpa/*"))
    (add-to-list 'load-path dir))
  (if (not (require 'package-lint nil t))
      (progn
        (message "package-lint: missing")
        (kill-emacs (if (> agentd-lint--problems 0) 1 2)))
    (with-current-buffer (find-file-noselect file)
      (let ((found (seq-remove #'agentd-lint--stale-p (package-lint-buffer))))
        (dolist (problem found)
          (pcase-let ((`(,line ,column ,type ,text) problem))
            (agentd-lint--problem "package-lint: %s:%d:%d: %s: %s"
                                  file line column type text)))
        (unless found (message "package-lint: clean")))))

  (kill-emacs (if (> agentd-lint--problems 0) 1 0)))

;;; agentd-lint.el ends here

;;; agentd-test.el --- Tests of agentd.el against the real daemon -*- lexical-binding: t; -*-

;;; Commentary:

;; Run by tests/tests/e2e/editor_emacs.rs, which starts the real daemon
;; on a temporary socket with a mock provider, and runs
;;
;;   emacs --batch -Q -L editors/emacs -l editors/emacs/test/agentd-test.el \
;;     --eval '(ert-run-tests-batch-and-exit (quote (not (tag autostart))))'
;;
;; with AGENTD_SOCKET, AGENTD_TEST_WORKDIR (a directory for the
;; sessions) and AGENTD_TEST_AGENTCTL (the built agentctl) set.  The
;; mock answers by the prompt: "PLEASE-RUN CMD" calls the shell with CMD,
;; "PLEASE-THINK" reasons before answering, "PLEASE-EDIT FILE" edits
;; FILE ("old line" becomes "new line"), "PLEASE-ASK" asks the user
;; which database (postgres or sqlite); after a tool round it answers
;; "The tool said: OUTPUT", adding "Heard: TEXT" for steering it got;
;; anything else is answered "Echo: PROMPT".  A test asks the harness
;; for what Emacs cannot do itself (restarting the daemon) by printing
;; "AGENTD-TEST-REQUEST ..." and reading the harness's "done" on stdin.

;;; Code:

(require 'agentd)
(require 'cl-lib)
(require 'ert)

(defconst agentd-test--wait 60
  "Upper bound of any wait, in seconds: a guard against hangs, not a timing test.")

(defun agentd-test--wait-for (what predicate)
  "Process events until PREDICATE holds; fail naming WHAT after the bound."
  (let ((deadline (+ (float-time) agentd-test--wait)))
    (while (not (funcall predicate))
      (when (> (float-time) deadline)
        (ert-fail (format "timed out waiting for %s; the last transcript:\n%s" what
                          (let ((view (gethash agentd--last-session agentd--views)))
                            (if view (agentd-test--text (agentd--view-id view)) "none")))))
      (accept-process-output nil 0.05))))

(defun agentd-test--dir (name)
  "A fresh directory NAME for a session, under AGENTD_TEST_WORKDIR."
  (let ((dir (expand-file-name name (getenv "AGENTD_TEST_WORKDIR"))))
    (make-directory dir t)
    (file-name-as-directory dir)))

(defun agentd-test--view (id)
  "The view of session ID."
  (or (gethash id agentd--views) (ert-fail (format "no view of %s" id))))

(defun agentd-test--text (id)
  "The text of session ID's transcript, folded parts included."
  (with-current-buffer (agentd--view-buffer (agentd-test--view id))
    (buffer-substring-no-properties (point-min) (point-max))))

(defun agentd-test--count (regexp text)
  "How many times REGEXP matches in TEXT."
  (let ((count 0) (start 0))
    (while (string-match regexp text start)
      (setq count (1+ count) start (match-end 0)))
    count))

(defun agentd-test--ends (id)
  "How many processing cycles session ID's transcript shows ended."
  (agentd-test--count "^── [a-z ]+ ──$" (agentd-test--text id)))

(defun agentd-test--run (id text)
  "Submit TEXT to session ID and wait until the cycle it starts has ended."
  (let ((before (agentd-test--ends id)))
    (agentd-submit text id)
    (agentd-test--wait-for (format "the end of %S" text)
                           (lambda () (> (agentd-test--ends id) before)))))

(defun agentd-test--contains (id text)
  "Wait until session ID's transcript contains TEXT."
  (agentd-test--wait-for (format "%S in the transcript" text)
                         (lambda () (string-search text (agentd-test--text id)))))

(defun agentd-test--ask (request)
  "Ask the harness to do REQUEST and wait for its answer."
  (message "AGENTD-TEST-REQUEST %s" request)
  (let ((answer (read-string "")))
    (unless (equal answer "done")
      (ert-fail (format "the harness answered %S to %S" answer request)))))

(defun agentd-test--folds (id)
  "The fold overlays of session ID's transcript, in buffer order."
  (with-current-buffer (agentd--view-buffer (agentd-test--view id))
    (sort (seq-filter (lambda (o) (overlay-get o 'agentd-fold))
                      (overlays-in (point-min) (point-max)))
          (lambda (a b) (< (overlay-start a) (overlay-start b))))))

(defun agentd-test--gone-p (pid)
  "Whether the process PID has ended (a zombie counts as ended)."
  (let ((attributes (process-attributes pid)))
    (or (null attributes) (equal (alist-get 'state attributes) "Z"))))

(defun agentd-test--agentctl (&rest args)
  "Run the built agentctl with ARGS; return its standard output, trimmed."
  (with-temp-buffer
    (let ((status (apply #'call-process (getenv "AGENTD_TEST_AGENTCTL") nil
                         (list t nil) nil args)))
      (unless (eql status 0)
        (ert-fail (format "agentctl %S exited with %s: %s" args status (buffer-string))))
      (string-trim (buffer-string)))))

(ert-deftest agentd-test-framing-survives-partial-lines ()
  "Lines cut anywhere, even inside a UTF-8 sequence, are reassembled."
  (let* ((conn (agentd--conn-make))
         (got nil)
         (bytes (encode-coding-string
                 (concat "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"caf\u00e9 \u2713\"}\n"
                         "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":\"second\"}\n")
                 'utf-8))
         ;; Inside the two bytes of é, then inside the second message.
         (cut1 (1+ (string-search "\303" bytes)))
         (cut2 (+ cut1 40)))
    (dolist (id '(1 2))
      (puthash id (lambda (msg) (push (alist-get 'result msg) got))
               (agentd--conn-pending conn)))
    (agentd--feed conn (substring bytes 0 cut1))
    (should (null got))
    (agentd--feed conn (substring bytes cut1 cut2))
    (should (equal got '("café ✓")))
    (agentd--feed conn (substring bytes cut2))
    (should (equal (nreverse got) '("café ✓" "second")))
    (should (equal (agentd--conn-partial conn) ""))))

(ert-deftest agentd-test-submit-with-a-tool-round-trip ()
  "A session is created, runs a shell call, and its transcript shows it all."
  (let ((id (agentd-new (agentd-test--dir "roundtrip") "round trip")))
    (should (stringp id))
    (agentd-test--run id "PLEASE-RUN echo hi-from-tool")
    (let ((text (agentd-test--text id)))
      (should (string-search "“round trip”" text))
      (should (string-search "> PLEASE-RUN echo hi-from-tool\n" text))
      (should (string-search "Running it.\n" text))
      (should (string-match-p "⚙ shell echo hi-from-tool \\[done, [0-9]+ ms\\]\nhi-from-tool\n" text))
      (should (string-search "The tool said: hi-from-tool" text))
      (should (string-match-p "usage: in [0-9]+, out [0-9]+" text))
      (should (string-search "── completed ──" text)))
    (should (equal (agentd-status id) "idle"))
    (agentd-status-mode 1)
    (should (equal (agentd--global-status) " agentd[idle]"))
    (agentd-status-mode -1)
    (with-current-buffer (agentd--view-buffer (agentd-test--view id))
      ;; What the mode line shows (batch Emacs formats no :eval, so call it).
      (should (equal mode-line-process '(:eval (agentd--mode-line-process))))
      (should (equal (agentd--mode-line-process) " [idle]")))
    (should (= (agentd--view-last-seq (agentd-test--view id))
               (alist-get 'last_seq (agentd--call "session/get" (list :session_id id)))))))

(ert-deftest agentd-test-skills-and-commands-complete-after-a-slash ()
  "The prompt offers the session's skills and commands; a command expands."
  (let* ((dir (agentd-test--dir "commands"))
         (skill (expand-file-name ".agents/skills/lint/SKILL.md" dir))
         (command (expand-file-name ".agents/commands/greet.md" dir)))
    (make-directory (file-name-directory skill) t)
    (make-directory (file-name-directory command) t)
    (with-temp-file skill (insert "---\nname: lint\ndescription: Lints code.\n---\nLint.\n"))
    (with-temp-file command
      (insert "---\ndescription: Greets someone\n---\nSay hello to $1.\n"))
    (let ((id (agentd-new dir "commands")))
      (should (equal (agentd--commands id)
                     '(("/greet" . "Greets someone") ("/lint" . "Lints code."))))
      ;; What the minibuffer offers: the names, each with its description.
      (let (offered annotated)
        (cl-letf (((symbol-function 'completing-read)
                   (lambda (_prompt collection &rest _)
                     (setq offered (all-completions "/" collection)
                           annotated (funcall (plist-get completion-extra-properties
                                                         :annotation-function)
                                              "/greet"))
                     "/greet World")))
          (should (equal (agentd--read-prompt "Prompt: " id) "/greet World")))
        (should (equal offered '("/greet" "/lint")))
        (should (equal annotated "  Greets someone")))
      (agentd-test--run id "/greet World")
      (agentd-test--contains id "Echo: Say hello to World."))))

(ert-deftest agentd-test-reasoning-and-long-output-are-folded ()
  "Reasoning is folded; so is long tool output, past its first lines."
  (let ((id (agentd-new (agentd-test--dir "folds"))))
    (agentd-test--run id "PLEASE-THINK")
    (should (string-search "Let me think about it carefully." (agentd-test--text id)))
    (should (string-search "Thought it through." (agentd-test--text id)))
    (let ((fold (car (agentd-test--folds id))))
      (should fold)
      (should (string-search "thinking" (overlay-get fold 'display)))
      (with-current-buffer (agentd--view-buffer (agentd-test--view id))
        (goto-char (overlay-start fold))
        (agentd-toggle-fold)
        (should (null (overlay-get fold 'display)))
        (agentd-toggle-fold)
        (should (overlay-get fold 'display))))
    (agentd-test--run id "PLEASE-RUN seq 1 40")
    (let ((text (agentd-test--text id))
          (fold (cadr (agentd-test--folds id))))
      (should (string-search "\n1\n2\n" text))
      (should (string-search "\n39\n40\n" text))
      (should fold)
      ;; Lines 13 to 40, and the shell's line with the exit code.
      (should (string-search "29 more lines" (overlay-get fold 'display)))
      (with-current-buffer (agentd--view-buffer (agentd-test--view id))
        (should (string-match-p
                 (concat "\\`" (mapconcat (lambda (n) (format "%d\n" n)) (number-sequence 13 40) "")
                         "\\[exit code: 0[^\n]*\n\\'")
                 (buffer-substring-no-properties (overlay-start fold) (overlay-end fold))))))))

(ert-deftest agentd-test-an-edit-opens-as-a-diff ()
  "An edit by the agent shows as a diff, and a buffer visiting the file is reverted."
  (let* ((dir (agentd-test--dir "edits"))
         (file (expand-file-name "hello.txt" dir)))
    (with-temp-file file (insert "first\nold line\nlast\n"))
    (let ((visiting (find-file-noselect file))
          (id (agentd-new dir)))
      (agentd-test--run id "PLEASE-EDIT hello.txt")
      (should (string-match-p "⚙ edit_file .*hello.txt.* \\[done" (agentd-test--text id)))
      (with-current-buffer (agentd--diff-buffer (agentd-test--view id))
        (should (derived-mode-p 'diff-mode))
        (should (string-search "+++ b/hello.txt" (buffer-string)))
        (should (string-search "\n-old line\n+new line\n" (buffer-string))))
      (with-current-buffer visiting
        (should (equal (buffer-string) "first\nnew line\nlast\n")))
      (kill-buffer visiting))))

(ert-deftest agentd-test-steer-and-follow-up-while-working ()
  "Steering reaches the model after the tool round; the follow-up runs next."
  (let* ((dir (agentd-test--dir "steer"))
         (mark (expand-file-name "release" dir))
         (id (agentd-new dir)))
    (agentd-submit (format "PLEASE-RUN while [ ! -e %s ]; do sleep 0.05; done; echo released"
                           mark)
                   id)
    (agentd-test--contains id "[running]")
    (should (equal (agentd-status id) "working"))
    (should (equal (alist-get 'disposition (agentd-steer "turn left" id)) "steering"))
    (should (equal (alist-get 'disposition (agentd-follow-up "then stop" id)) "follow_up"))
    (let ((queue (agentd-queue id)))
      (should (equal (mapcar (lambda (i) (alist-get 'text i)) (alist-get 'steering queue))
                     '("turn left")))
      (should (equal (mapcar (lambda (i) (alist-get 'text i)) (alist-get 'follow_up queue))
                     '("then stop"))))
    (with-current-buffer (agentd--view-buffer (agentd-test--view id))
      (agentd-test--wait-for "the queue in the header line"
                             (lambda () (string-search "queued: 1 steering, 1 follow-up"
                                                       (agentd--header-line)))))
    (with-temp-file mark)
    (agentd-test--contains id "Echo: then stop")
    ;; The follow-up runs in the same processing cycle, which then ends once.
    (agentd-test--wait-for "the end of the cycle" (lambda () (= (agentd-test--ends id) 1)))
    (let ((text (agentd-test--text id)))
      (should (string-search "> (steer) turn left\n" text))
      (should (string-search "The tool said: released Heard: turn left" text))
      (should (string-search "> then stop\n" text))
      (should (< (string-search "Heard: turn left" text) (string-search "> then stop" text))))))

(ert-deftest agentd-test-abort-ends-the-process ()
  "Abort stops the work and its process; a cleared queue is returned."
  (let* ((id (agentd-new (agentd-test--dir "abort")))
         pid)
    (agentd-submit "PLEASE-RUN echo PID=$$; exec sleep 600" id)
    (agentd-test--wait-for "the command's pid"
                           (lambda ()
                             (when (string-match "PID=\\([0-9]+\\)" (agentd-test--text id))
                               (setq pid (string-to-number (match-string 1 (agentd-test--text id)))))))
    (should-not (agentd-test--gone-p pid))
    (agentd-follow-up "never run" id)
    (let ((cleared (agentd-queue-clear id)))
      (should (equal (mapcar (lambda (i) (alist-get 'text i)) (alist-get 'follow_up cleared))
                     '("never run"))))
    (let ((result (agentd-abort id)))
      (should (eq (alist-get 'aborted result) t))
      (should (equal (alist-get 'state result) "idle")))
    (should (agentd-test--gone-p pid))
    (agentd-test--contains id "── aborted ──")
    (should (string-match-p "⚙ shell .*exec sleep 600 \\[failed\\]" (agentd-test--text id)))
    (should (equal (agentd-status id) "idle"))
    (should-not (string-search "never run" (agentd-test--text id)))))

(ert-deftest agentd-test-attach-to-a-session-started-by-agentctl ()
  "A session agentctl started and ran shows whole, and is in the session list."
  (let* ((dir (agentd-test--dir "from-agentctl"))
         (id (agentd-test--agentctl "new" "--cwd" dir "--title" "from agentctl")))
    (agentd-test--agentctl "submit" "--follow" id "hello from agentctl")
    (agentd-attach id)
    (agentd-test--contains id "Echo: hello from agentctl")
    (let ((text (agentd-test--text id)))
      (should (string-search "“from agentctl”" text))
      (should (= 1 (agentd-test--count "^> hello from agentctl$" text))))
    (should (equal (buffer-name) (format "*agentd: from agentctl %s*" (substring id 0 8))))
    (agentd-sessions)
    (with-current-buffer agentd--sessions-buffer
      (goto-char (point-min))
      (should (search-forward "from agentctl" nil t))
      (should (equal (tabulated-list-get-id) id))
      (should (equal (aref (tabulated-list-get-entry) 1) "idle"))
      ;; The list follows the daemon's changes.
      (agentd-test--agentctl "new" "--cwd" dir "--title" "made later")
      (agentd-test--wait-for "the new session in the list"
                             (lambda ()
                               (goto-char (point-min))
                               (search-forward "made later" nil t))))))

(ert-deftest agentd-test-reconnect-after-a-restart-loses-nothing ()
  "After a daemon restart, the transcript resumes: nothing lost, nothing twice."
  (let ((id (agentd-new (agentd-test--dir "restart"))))
    (agentd-test--run id "first")
    ;; The harness stops the daemon, starts it again and runs "second"
    ;; in this session while Emacs is not connected.
    (agentd-test--ask (concat "restart-and-submit " id " second"))
    (agentd-test--contains id "Echo: second")
    (agentd-test--wait-for "the resubscription"
                           (lambda () (stringp (agentd--view-sub (agentd-test--view id)))))
    (agentd-test--run id "third")
    (let ((text (agentd-test--text id)))
      (should (= 1 (agentd-test--count "^Session " text)))
      (dolist (word '("first" "second" "third"))
        (should (= 1 (agentd-test--count (format "^> %s$" word) text)))
        (should (= 1 (agentd-test--count (format "^Echo: %s$" word) text))))
      (should (< (string-search "Echo: first" text) (string-search "Echo: second" text)
                 (string-search "Echo: third" text))))
    (should (= (agentd--view-last-seq (agentd-test--view id))
               (alist-get 'last_seq (agentd--call "session/get" (list :session_id id)))))))

(ert-deftest agentd-test-context-from-a-region-and-a-file ()
  "The region and the file go with the prompt, named by their place."
  (let* ((dir (agentd-test--dir "context"))
         (file (expand-file-name "notes.txt" dir))
         (id (agentd-new dir)))
    (with-temp-file file (insert "alpha\nbeta\ngamma\n"))
    (with-current-buffer (find-file-noselect file)
      (agentd-send-region (point-min) (progn (goto-char (point-min)) (forward-line 2) (point))
                          "explain these" id)
      (agentd-test--contains id "Echo: explain these")
      (agentd-send-file file "and the whole file" id)
      (agentd-test--contains id "Echo: and the whole file")
      (kill-buffer))
    (agentd-compose id)
    (insert "a longer\nprompt")
    (agentd-compose-send)
    (agentd-test--contains id "Echo: a longer\nprompt")
    (let ((text (agentd-test--text id)))
      (should (string-search "Lines 1-2 of notes.txt:\n```\nalpha\nbeta\n```" text))
      (should (string-search "The file notes.txt:\n```\nalpha\nbeta\ngamma\n```" text)))))

(ert-deftest agentd-test-fork-rollback-and-close ()
  "A fork is a new session with the conversation; rollback and close show."
  (let* ((id (agentd-new (agentd-test--dir "fork")))
         fork)
    (agentd-test--run id "before the fork")
    (agentd-test--run id "to be undone")
    (should (> (alist-get 'removed (agentd-rollback id 1)) 0))
    (agentd-test--contains id "rolled back")
    (setq fork (agentd-fork id "the fork"))
    (should-not (equal fork id))
    (let ((snapshot (agentd--call "session/get" (list :session_id fork))))
      (should (equal (alist-get 'title snapshot) "the fork"))
      (should (equal (alist-get 'session_id (alist-get 'forked_from snapshot)) id)))
    (agentd-close fork)
    (agentd-test--wait-for "the closed state" (lambda () (equal (agentd-status fork) "closed")))
    (agentd-test--contains fork "session closed")))

(ert-deftest agentd-test-mcp-server-states-are-shown ()
  "A session's MCP servers start with its first input; the transcript says which became
ready, with how many tools, and which failed, with why."
  (let ((id (agentd-new (agentd-test--dir "mcp")))
        (time (getenv "AGENTD_TEST_MCP_TIME")))
    ;; The harness gives mcp-server-time's path when it is installed (always under CI).
    (agentd--call "session/set_config"
                  (list :session_id id
                        :config (list :mcp_servers
                                      (append
                                       (list :missing (list :command "agentd-no-such-mcp-server"))
                                       (and time (list :time (list :command time
                                                                   :args ["--local-timezone" "UTC"])))))))
    (agentd-test--run id "hello servers")
    (agentd-test--contains id "MCP server missing: failed (cannot start agentd-no-such-mcp-server")
    (when time
      (agentd-test--contains id "MCP server time: ready, 2 tools"))
    (should-not (string-search ": starting" (agentd-test--text id)))))

(ert-deftest agentd-test-daemon-errors-are-user-errors ()
  "The daemon's errors reach the user as `user-error's naming the cause."
  (let ((err (should-error (agentd-attach "00000000-0000-0000-0000-000000000000")
                           :type 'user-error)))
    (should (string-search "session_not_found" (error-message-string err))))
  (let ((id (agentd-new (agentd-test--dir "errors"))))
    (should-error (agentd-submit "  " id) :type 'user-error)
    (agentd-close id)
    (let ((err (should-error (agentd-submit "too late" id) :type 'user-error)))
      (should (string-search "session_closed" (error-message-string err))))))

(ert-deftest agentd-test-approvals-and-questions-are-answered ()
  "Approvals (a command, an edit shown as a diff) and a question are answered."
  (let* ((agentd-approval-mode "ask")
         (dir (agentd-test--dir "approvals"))
         (out (expand-file-name "out.txt" dir))
         (hello (expand-file-name "hello.txt" dir))
         (id (agentd-new dir)))
    ;; A command waits until it is allowed.
    (agentd-submit "PLEASE-RUN echo approved > out.txt" id)
    (agentd-test--contains id "? approve shell: $ echo approved > out.txt  (r answers)")
    (agentd-test--wait-for "awaiting input" (lambda () (equal (agentd-status id) "awaiting input")))
    (should (= 1 (length (agentd--view-pending (agentd-test--view id)))))
    (should-not (file-exists-p out))
    (let ((answered (agentd-respond 'allow id)))
      (should (equal (alist-get 'pending answered) 0)))
    (agentd-test--wait-for "the end of the command" (lambda () (= (agentd-test--ends id) 1)))
    (should (equal (with-temp-buffer (insert-file-contents out) (buffer-string)) "approved\n"))
    ;; The request and its answer show under the call, before its output.
    (should (string-match-p (concat "⚙ shell echo approved > out.txt \\[done, [0-9]+ ms\\]\n"
                                    "\\? approve shell: \\$ echo approved > out.txt  (r answers)\n"
                                    "  allowed shell (client)\n"
                                    "\\[exit code: 0")
                            (agentd-test--text id)))
    (should (null (agentd--view-pending (agentd-test--view id))))
    ;; An edit shows its diff before it runs, and a denied one is not made.
    (with-temp-file hello (insert "first\nold line\nlast\n"))
    (agentd-submit "PLEASE-EDIT hello.txt" id)
    (agentd-test--contains id "? approve edit_file hello.txt  (r answers)\n")
    (agentd-test--contains id "  -old line\n  +new line\n")
    ;; Interactively, the request is shown and the answer read as one key.
    (with-current-buffer (agentd--view-buffer (agentd-test--view id))
      (cl-letf (((symbol-function 'read-multiple-choice)
                 (lambda (prompt _choices)
                   (should (equal prompt "approve edit_file hello.txt"))
                   (with-current-buffer "*agentd request*"
                     (should (derived-mode-p 'diff-mode))
                     (should (string-search "-old line\n+new line" (buffer-string))))
                   '(?d "deny"))))
        (call-interactively #'agentd-respond)))
    (agentd-test--wait-for "the end of the edit" (lambda () (= (agentd-test--ends id) 2)))
    (should (string-search "  denied edit_file (client)" (agentd-test--text id)))
    (should (equal (with-temp-buffer (insert-file-contents hello) (buffer-string))
                   "first\nold line\nlast\n"))
    ;; A question is answered with text.
    (agentd-submit "PLEASE-ASK" id)
    (agentd-test--contains id "? Which database? [postgres / sqlite]")
    (should-error (agentd-respond 'allow id) :type 'user-error)
    (agentd-respond "sqlite" id)
    (agentd-test--contains id "The tool said: The user answered: sqlite")
    (should (string-search "  answered: sqlite (client)" (agentd-test--text id)))
    ;; Nothing waits now.
    (let ((err (should-error (agentd-respond 'allow id) :type 'user-error)))
      (should (string-search "no request waiting" (error-message-string err))))))

(ert-deftest agentd-test-a-socket-others-could-reach-is-refused ()
  "A socket whose directory others can reach, or another user's, is never used."
  (let* ((dir (make-temp-file "agentd-untrusted-" t))
         (path (expand-file-name "agentd.sock" dir))
         (connections 0)
         (server (make-network-process
                  :name "agentd-test-server" :family 'local :service path
                  :server t :noquery t
                  :log (lambda (&rest _) (cl-incf connections))))
         (agentd-socket path)
         (agentd--conn nil))
    (unwind-protect
        (progn
          (set-file-modes dir #o777)
          (let ((err (should-error (agentd-new (agentd-test--dir "untrusted"))
                                   :type 'user-error)))
            (should (string-search
                     "is open to other users (mode 0777; it must be 0700)"
                     (error-message-string err))))
          (set-file-modes dir #o700)
          (if (zerop (user-uid))
              (progn
                (should (zerop (call-process "chown" nil nil nil "4242" path)))
                (let ((err (should-error (agentd-new (agentd-test--dir "untrusted"))
                                         :type 'user-error)))
                  (should (string-search "it is a socket of uid 4242, not a socket of yours"
                                         (error-message-string err)))))
            (should-not (equal (getenv "CI") "true")))
          (accept-process-output nil 0.1)
          (should (zerop connections)))
      (delete-process server)
      (delete-directory dir t))))

(ert-deftest agentd-test-autostart-through-agentctl ()
  "With no daemon answering, the first command starts one through agentctl."
  :tags '(autostart)
  (should-not (agentd--open (agentd--socket-path)))
  (let* ((agentd-agentctl-program (getenv "AGENTD_TEST_AGENTCTL"))
         (id (agentd-new (agentd-test--dir "autostart"))))
    (agentd-test--run id "after autostart")
    (agentd-test--contains id "Echo: after autostart")
    (agentd--call "daemon/shutdown")))

(provide 'agentd-test)
;;; agentd-test.el ends here

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
;; "PLEASE-THINK" reasons before answering, "PLEASE-FLOOD" answers 6000 words, "PLEASE-EDIT FILE" edits
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

(setq agentd-agentctl-program (getenv "AGENTD_TEST_AGENTCTL"))

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

(ert-deftest agentd-test-framing-survives-partial-messages ()
  "Content-Length messages cut anywhere, even inside a UTF-8 sequence, are reassembled."
  (let* ((dir (make-temp-file "agentd-framing-" t))
         (path (expand-file-name "agentd.sock" dir))
         (peer nil)
         (server (make-network-process
                  :name "agentd-test-framing" :family 'local :service path
                  :server t :noquery t :coding 'binary
                  :log (lambda (_server client _message) (setq peer client))))
         (conn (agentd--open path))
         (buffer (process-buffer (agentd--conn-process conn)))
         (got nil)
         (bytes (mapconcat
                 (lambda (body)
                   (encode-coding-string
                    (format "Content-Length: %d\r\n\r\n%s"
                            (string-bytes (encode-coding-string body 'utf-8)) body)
                    'utf-8))
                 '("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"caf\u00e9 \u2713\"}"
                   "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":\"second\"}")
                 ""))
         ;; Inside the two bytes of é, then inside the second message's header.
         (cut1 (1+ (string-search "\303" bytes)))
         (cut2 (+ (string-search "Content-Length" bytes 1) 5)))
    (unwind-protect
        (progn
          (dotimes (_ 2)
            (agentd--send conn "test/answer" nil
                          (lambda (msg) (push (alist-get 'result msg) got))))
          (agentd-test--wait-for "the connection" (lambda () peer))
          (process-send-string peer (substring bytes 0 cut1))
          (agentd-test--wait-for "the first piece"
                                 (lambda () (with-current-buffer buffer
                                              (string-search "caf" (buffer-string)))))
          (should (null got))
          (process-send-string peer (substring bytes cut1 cut2))
          (agentd-test--wait-for "the first message" (lambda () got))
          (should (equal got '("café ✓")))
          (process-send-string peer (substring bytes cut2))
          (agentd-test--wait-for "the second message" (lambda () (cdr got)))
          (should (equal (nreverse got) '("café ✓" "second"))))
      (delete-process (agentd--conn-process conn))
      (delete-process server)
      (delete-directory dir t))))

(ert-deftest agentd-test-a-message-past-the-cap-ends-the-connection ()
  "A message longer than the cap (a huge Content-Length, or no header at
all) is not buffered without end: the connection closes."
  (dolist (start '("Content-Length: 1000000000\r\n\r\n[" "no header, only bytes "))
    (let* ((agentd--max-message-chars 4096)
           (dir (make-temp-file "agentd-cap-" t))
           (path (expand-file-name "agentd.sock" dir))
           (peer nil)
           (server (make-network-process
                    :name "agentd-test-cap" :family 'local :service path
                    :server t :noquery t :coding 'binary
                    :log (lambda (_server client _message) (setq peer client))))
           (conn (agentd--open path)))
      (unwind-protect
          (progn
            (agentd-test--wait-for "the connection" (lambda () peer))
            (process-send-string peer start)
            (dotimes (_ 10)
              (when (process-live-p peer)
                (process-send-string peer (make-string 1000 ?x)))
              (accept-process-output nil 0.01))
            (agentd-test--wait-for "the connection to close"
                                   (lambda () (not (jsonrpc-running-p conn)))))
        (delete-process (agentd--conn-process conn))
        (delete-process server)
        (delete-directory dir t)))))

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
    ;; Text beyond ASCII goes and comes back whole (Content-Length counts bytes).
    (agentd-test--run id "café ✓ 日本")
    (should (string-search "\nEcho: café ✓ 日本" (agentd-test--text id)))
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

(ert-deftest agentd-test-a-lagged-stream-resumes-without-loss ()
  "While Emacs reads nothing, a flood of events makes the daemon drop its
stream as lagged; the package subscribes again after the last event it
showed, from inside the handler of the end, so each event shows once."
  (let* ((id (agentd-new (agentd-test--dir "lagged")))
         (subscribes 0)
         (count (lambda (&rest _) (cl-incf subscribes))))
    (agentd-test--wait-for "the subscription"
                           (lambda () (stringp (agentd--view-sub (agentd-test--view id)))))
    (advice-add 'agentd--subscribe-on :before count)
    (unwind-protect
        (progn
          ;; The harness runs the flood while Emacs waits for its answer, reading nothing.
          (agentd-test--ask (concat "submit " id " PLEASE-FLOOD"))
          (let ((last (alist-get 'last_seq (agentd--call "session/get" (list :session_id id)))))
            (agentd-test--wait-for "every event"
                                   (lambda () (>= (agentd--view-last-seq (agentd-test--view id))
                                                  last)))))
      (advice-remove 'agentd--subscribe-on count))
    (should (>= subscribes 1))
    (let ((text (agentd-test--text id)))
      (should (= 1 (agentd-test--count "^> PLEASE-FLOOD$" text)))
      (should (= 1 (agentd-test--count (concat "^" (string-join (make-list 6000 "w") " ") "$")
                                       text)))
      (should (= 1 (agentd-test--ends id))))))

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

(ert-deftest agentd-test-undo-redo-and-the-agents-changes ()
  "The agent's changes show as a diff; undo puts the file back and redo
brings the change again; an undo over the user's own change names the
file and is forced only when the user agrees."
  (let* ((dir (agentd-test--dir "undo"))
         (file (expand-file-name "hello.txt" dir))
         (read-file (lambda () (with-temp-buffer (insert-file-contents file) (buffer-string))))
         id)
    (with-temp-file file (insert "first\nold line\nlast\n"))
    (setq id (agentd-new dir))
    (agentd-test--run id "PLEASE-EDIT hello.txt")
    (should (equal (funcall read-file) "first\nnew line\nlast\n"))
    (with-current-buffer (agentd-diff id)
      (should (derived-mode-p 'diff-mode))
      (should buffer-read-only)
      (should (string-search "+++ b/hello.txt" (buffer-string)))
      (should (string-search "\n-old line\n+new line\n" (buffer-string))))
    (let ((visiting (find-file-noselect file)))
      (should (equal (alist-get 'restored (alist-get 'files (agentd-undo id))) '("hello.txt")))
      (should (equal (funcall read-file) "first\nold line\nlast\n"))
      ;; A buffer visiting the file follows it.
      (with-current-buffer visiting
        (should (equal (buffer-string) "first\nold line\nlast\n")))
      (kill-buffer visiting))
    (agentd-test--contains id "rolled back")
    (agentd-redo id)
    (should (equal (funcall read-file) "first\nnew line\nlast\n"))
    (agentd-test--contains id "redone: the entries the rollback took are back")
    ;; The user changes the file: the undo is refused, naming it.
    (with-temp-file file (insert "first\nmy line\nlast\n"))
    (let ((err (should-error (agentd-undo id) :type 'user-error)))
      (should (string-search "You changed hello.txt since the agent did, so nothing was restored"
                             (error-message-string err))))
    (should (equal (funcall read-file) "first\nmy line\nlast\n"))
    ;; Interactively the user is asked; no keeps the file, yes forces the undo.
    (let (asked)
      (cl-letf (((symbol-function 'yes-or-no-p) (lambda (prompt) (push prompt asked) nil)))
        (with-current-buffer (agentd--view-buffer (agentd-test--view id))
          (should-error (call-interactively #'agentd-undo) :type 'user-error)))
      (should (string-search "You changed hello.txt since the agent did; restore anyway"
                             (car asked)))
      (should (equal (funcall read-file) "first\nmy line\nlast\n"))
      (cl-letf (((symbol-function 'yes-or-no-p) (lambda (_prompt) t)))
        (with-current-buffer (agentd--view-buffer (agentd-test--view id))
          (call-interactively #'agentd-undo))))
    (should (equal (funcall read-file) "first\nold line\nlast\n"))
    ;; The user's version was kept: the redo brings it back.
    (agentd-redo id)
    (should (equal (funcall read-file) "first\nmy line\nlast\n"))))

(defun agentd-test--refusal (socket)
  "The `user-error' of `agentd-new' with SOCKET as `agentd-socket', as text."
  (let ((agentd-socket socket)
        (agentd--conn nil))
    (error-message-string
     (should-error (agentd-new (agentd-test--dir "untrusted")) :type 'user-error))))

(ert-deftest agentd-test-a-socket-others-could-reach-is-refused ()
  "agentctl's refusal of a runtime directory others can reach, or of another
user's server, is what the user sees; nothing is sent there."
  (let ((tmp (make-temp-file "agentd-untrusted-" t)))
    (unwind-protect
        (progn
          ;; Without XDG_RUNTIME_DIR the socket is in <tmp>/agentd-UID, which must be private.
          (let ((runtime (expand-file-name (format "agentd-%d" (user-uid)) tmp))
                ;; A copy: `setenv' changes an existing entry in place.
                (process-environment (copy-sequence process-environment)))
            (setenv "TMPDIR" tmp)
            (setenv "AGENTD_SOCKET")
            (setenv "XDG_RUNTIME_DIR")
            (make-directory runtime)
            (set-file-modes runtime #o777)
            (should (string-search (format "refusing to use the runtime directory: %s has mode 0777"
                                           runtime)
                                   (agentd-test--refusal nil))))
          ;; Another user's server on an explicit socket: agentctl still checks who serves it.
          (if (not (zerop (user-uid)))
              (should-not (equal (getenv "CI") "true"))
            (let* ((socket (expand-file-name "other.sock" tmp))
                   (got (expand-file-name "got" tmp))
                   (server (progn
                             ;; The other user creates its socket and its record here.
                             (set-file-modes tmp #o777)
                             (start-process
                            "agentd-test-other-user" nil "setpriv" "--reuid=4242" "--regid=4242"
                            "--clear-groups" "socat"
                            (format "UNIX-LISTEN:%s,mode=666" socket)
                            (format "OPEN:%s,creat,append" got)))))
              (unwind-protect
                  (progn
                    (agentd-test--wait-for "the other user's server"
                                           (lambda () (file-exists-p socket)))
                    (should (string-search
                             (format "the process serving %s runs as uid 4242, not as you" socket)
                             (agentd-test--refusal socket)))
                    (agentd-test--wait-for "the other user's server to end"
                                           (lambda () (not (process-live-p server))))
                    (should (zerop (or (file-attribute-size (file-attributes got)) 0))))
                (delete-process server)))))
      (delete-directory tmp t))))

(ert-deftest agentd-test-autostart-through-agentctl ()
  "With no daemon answering, the first command starts one through agentctl."
  :tags '(autostart)
  (should-not (agentd--open (getenv "AGENTD_SOCKET")))
  (let* ((agentd-agentctl-program (getenv "AGENTD_TEST_AGENTCTL"))
         (id (agentd-new (agentd-test--dir "autostart"))))
    (agentd-test--run id "after autostart")
    (agentd-test--contains id "Echo: after autostart")
    (agentd--call "daemon/shutdown")))

(provide 'agentd-test)
;;; agentd-test.el ends here
